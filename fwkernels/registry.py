"""Name lookups with one error shape: an unknown name fails with the list of valid ones."""
from __future__ import annotations

from typing import Iterable, Mapping, TypeVar

T = TypeVar("T")


def unknown(kind: str, name: str, valid: Iterable[str]) -> ValueError:
    """``unknown model 'resnet-50'; valid models: alexnet, ...``"""
    return ValueError(f"unknown {kind} {name!r}; valid {kind}s: {', '.join(valid)}")


def lookup(registry: Mapping[str, T], name: str, kind: str) -> T:
    """``registry[name]``, or a ValueError naming the valid names."""
    try:
        return registry[name]
    except KeyError:
        raise unknown(kind, name, registry) from None


def check(name: str, valid: Iterable[str], kind: str) -> str:
    """``name`` when it is one of ``valid``, else a ValueError naming them."""
    valid = tuple(valid)
    if name not in valid:
        raise unknown(kind, name, valid)
    return name
