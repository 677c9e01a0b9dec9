"""Small value classes: the runtime's events and approval vocabulary.

Why not ``dataclasses``: a ``@dataclass`` writes its ``__init__``, ``__repr__`` and
``__eq__`` as source and ``exec``s them when its module is imported. The events and the
approval classes would make their modules the costliest imports on the way to a fresh
process's first ``session/new`` (bench/startup measures it). A :class:`Record` subclass declares ``__slots__`` and writes a plain ``__init__``;
equality, ``repr`` and :meth:`Record.fields` come from here, over the slots of the class
and its bases, in declaration order.
"""

_SLOTS = {}  # class -> its slot names, bases first


def slot_names(cls):
    names = _SLOTS.get(cls)
    if names is None:
        names = []
        for klass in reversed(cls.__mro__):
            slots = klass.__dict__.get("__slots__", ())
            names.extend((slots,) if isinstance(slots, str) else slots)
        names = _SLOTS[cls] = tuple(names)
    return names


class Record:
    __slots__ = ()
    __hash__ = None  # mutable values, like a dataclass without frozen=True

    def fields(self):
        """``{slot name: value}``, in declaration order."""
        return {name: getattr(self, name) for name in slot_names(type(self))}

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name)
                   for name in slot_names(type(self)))

    def __repr__(self):
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in slot_names(type(self)))
        return f"{type(self).__qualname__}({values})"
