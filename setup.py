"""Packaging shim: the project is declared in setup.cfg."""

from setuptools import setup

setup()
