"""Packaging metadata, and the ACP registry entry kept in ``.ci/acp-registry/term2acp/``,
checked against the registry's published format (agentclientprotocol/registry: FORMAT.md,
CONTRIBUTING.md, agent.schema.json, AUTHENTICATION.md), restated here as rules."""

import configparser
import json
import os
import re
import xml.etree.ElementTree as ET

from term2acp import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTRY_DIR = os.path.join(ROOT, ".ci", "acp-registry", "term2acp")

# The registry's format, as its documents state it:
ENTRY_FIELDS = {"id", "name", "version", "description", "repository", "authors", "license",
                "icon", "distribution"}
REQUIRED_FIELDS = {"id", "name", "version", "description", "distribution"}
ID_PATTERN = r"[a-z][a-z0-9-]*"  # lowercase, digits, hyphens; starts with a letter
VERSION_PATTERN = r"[0-9]+\.[0-9]+\.[0-9]+"  # x.y.z, numeric parts
DISTRIBUTIONS = {"binary", "npx", "uvx"}
PACKAGE_FIELDS = {"package", "args", "env"}  # npx and uvx: package required
SVG_PAINTS = {"currentColor", "none", "inherit"}  # monochrome icons, 16x16, square


def setup_cfg():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.path.join(ROOT, "setup.cfg"))
    return parser


def console_scripts():
    lines = setup_cfg()["options.entry_points"]["console_scripts"].strip().splitlines()
    pairs = (line.split("=", 1) for line in lines if line.strip() and "=" in line
             and not line.strip().startswith("#"))
    return {name.strip(): target.strip() for name, target in pairs}


def entry():
    with open(os.path.join(ENTRY_DIR, "agent.json"), encoding="utf-8") as fh:
        return json.load(fh)


def test_packaging_console_scripts_include_the_package_runners_name():
    scripts = console_scripts()
    assert scripts["term2acp"] == scripts["term2-acp"] == "term2acp.__main__:main"
    assert scripts["term2-acp-chat"] == "term2acp.client.chat:main"


def test_packaging_license_file_matches_the_metadata():
    metadata = setup_cfg()["metadata"]
    assert metadata["license"] == "Apache-2.0"
    assert metadata["license_files"].strip() == "LICENSE"
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as fh:
        text = fh.read()
    assert "Apache License" in text[:200] and "Version 2.0, January 2004" in text[:200]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text


def test_packaging_version_has_one_source():
    assert setup_cfg()["metadata"]["version"].strip() == "attr: term2acp.__version__"
    assert re.fullmatch(VERSION_PATTERN, __version__)


def test_registry_entry_has_the_registry_format():
    data = entry()
    assert set(data) <= ENTRY_FIELDS, set(data) - ENTRY_FIELDS
    assert REQUIRED_FIELDS <= set(data), REQUIRED_FIELDS - set(data)
    assert re.fullmatch(ID_PATTERN, data["id"]) and data["id"] == os.path.basename(ENTRY_DIR)
    assert all(isinstance(data[key], str) and data[key] for key in
               ("name", "description", "license", "repository"))
    assert isinstance(data["authors"], list) and all(isinstance(a, str) for a in data["authors"])
    assert re.fullmatch(r"https://\S+", data["repository"])
    distribution = data["distribution"]
    assert distribution and set(distribution) <= DISTRIBUTIONS
    for kind in ("npx", "uvx"):
        if kind in distribution:
            package = distribution[kind]
            assert set(package) <= PACKAGE_FIELDS and package["package"]
            assert not package["package"].endswith("@latest")
            assert all(isinstance(arg, str) for arg in package.get("args", []))
            assert all(isinstance(v, str) for v in package.get("env", {}).values())


def test_registry_entry_matches_the_package():
    data, metadata = entry(), setup_cfg()["metadata"]
    assert data["version"] == __version__  # the registry checks a pinned package against it
    assert data["license"] == metadata["license"]
    assert data["repository"] == metadata["url"]
    uvx = data["distribution"]["uvx"]
    name, pinned = re.fullmatch(r"([A-Za-z0-9._-]+)(?:(?:==|@)(.+))?", uvx["package"]).groups()
    assert name == metadata["name"]
    assert not pinned or pinned == __version__
    # uvx runs the executable named like the package, with the entry's args: the agent itself
    assert name in console_scripts() and not uvx.get("args")


def test_registry_icon_is_a_monochrome_16px_square():
    assert entry()["icon"] == "./icon.svg"
    root = ET.parse(os.path.join(ENTRY_DIR, "icon.svg")).getroot()
    assert root.get("width") == root.get("height") == "16"
    assert root.get("viewBox") == "0 0 16 16"
    for element in root.iter():
        for attribute in ("fill", "stroke"):
            value = element.get(attribute)
            assert value is None or value in SVG_PAINTS, (element.tag, attribute, value)
