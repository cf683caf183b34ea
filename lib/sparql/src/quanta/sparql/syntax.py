"""quanta's own SPARQL algebra tree: nodes, RDF terms and property paths.

`quanta.sparql.translate` builds these from the native parser's algebra; the
fragment classifier, the smart client's planner and the engine's compiler
walk them. They are small on purpose: what those walks use, nothing more.

- `AlgebraNode`: an operator (`BGP`, `Join`, `Filter`, `RelationalExpression`,
  ...) with named parts. Parts are items (`node["p"]`) and attributes
  (`node.p`); a part the node lacks reads as None (`node.expr`).
- Terms are `str` subclasses holding their value (a variable's name, an
  IRI, a literal's lexical form, a blank node's label). Two terms are equal
  when they are of the same kind and spell the same: `"01"^^xsd:integer` and
  `"1"^^xsd:integer` are different terms, as in RDF; a term never equals a
  plain `str`.
- Property paths: `PathInverse`, `PathSequence`, `PathAlternative`,
  `PathRepeat` (`*`, `+`, `?`), `PathNegated` (over IRIs and inverse IRIs).
"""

from __future__ import annotations

from typing import Any

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


class AlgebraNode(dict[str, Any]):
    """An algebra operator: `name` and its parts, by name."""

    __slots__ = ("name",)

    def __init__(self, name: str, /, **parts: Any) -> None:
        super().__init__(parts)
        self.name = name

    def __getattr__(self, part: str) -> Any:
        if part.startswith("__"):
            raise AttributeError(part)
        return self.get(part)

    def __eq__(self, other: object) -> bool:
        return type(other) is AlgebraNode and self.name == other.name and dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        return f"{self.name}{dict.__repr__(self)}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_node, (self.name, dict(self)))


def _node(name: str, parts: dict[str, Any]) -> AlgebraNode:
    return AlgebraNode(name, **parts)


class RdfTerm(str):
    """A term of the algebra: a variable, an IRI, a literal or a blank node."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    # the string's own hash, a slot in C: terms are hashed a few hundred times per query compiled.
    # Var("x") and IriTerm("x") then share a hash, and `__eq__` tells them apart.
    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),))


class Var(RdfTerm):
    """A variable, by its name (without `?`)."""

    __slots__ = ()


class IriTerm(RdfTerm):
    """An IRI (absolute, as the parser resolved it)."""

    __slots__ = ()


class BlankTerm(RdfTerm):
    """A blank node, by its label (without `_:`)."""

    __slots__ = ()


class LiteralTerm(RdfTerm):
    """A literal: its lexical form (the str value), a language tag or a datatype
    (None for a simple literal, xsd:string)."""

    # str subclasses cannot have non-empty __slots__: the parts live in __dict__
    language: str | None
    datatype: IriTerm | None

    def __new__(cls, lexical: str, language: str | None = None, datatype: str | None = None) -> LiteralTerm:
        self = str.__new__(cls, lexical)
        self.language = language or None
        self.datatype = None if language or datatype is None or datatype == XSD_STRING else IriTerm(datatype)
        return self

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is LiteralTerm
            and str.__eq__(self, other)
            and self.datatype == other.datatype
            and (self.language or "").lower() == (other.language or "").lower()
        )

    def __hash__(self) -> int:
        return hash(("LiteralTerm", str(self), (self.language or "").lower(), self.datatype))

    def __repr__(self) -> str:
        extra = (
            f", language={self.language!r}"
            if self.language
            else f", datatype={str(self.datatype)!r}"
            if self.datatype
            else ""
        )
        return f"LiteralTerm({str.__repr__(self)}{extra})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (LiteralTerm, (str(self), self.language, None if self.datatype is None else str(self.datatype)))


# -- property paths --


class PropertyPath:
    """A property path other than one IRI."""

    __slots__ = ()

    def _key(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))


class PathInverse(PropertyPath):
    """`^arg`"""

    __slots__ = ("arg",)

    def __init__(self, arg: IriTerm | PropertyPath) -> None:
        self.arg = arg

    def _key(self) -> tuple[Any, ...]:
        return (self.arg,)

    def __repr__(self) -> str:
        return f"PathInverse({self.arg!r})"


class _PathList(PropertyPath):
    """A path of several parts (the two kinds below differ in their meaning only)."""

    __slots__ = ("args",)

    def __init__(self, *args: IriTerm | PropertyPath) -> None:
        self.args = list(args)

    def _key(self) -> tuple[Any, ...]:
        return tuple(self.args)

    def __repr__(self) -> str:
        return f"{type(self).__name__}{tuple(self.args)!r}"


class PathSequence(_PathList):
    """`a / b / ...`"""

    __slots__ = ()


class PathAlternative(_PathList):
    """`a | b | ...`"""

    __slots__ = ()


class PathRepeat(PropertyPath):
    """`path*`, `path+` or `path?` (`mod` is the operator)."""

    __slots__ = ("mod", "path")

    def __init__(self, path: IriTerm | PropertyPath, mod: str) -> None:
        self.path = path
        self.mod = mod

    def _key(self) -> tuple[Any, ...]:
        return (self.path, self.mod)

    def __repr__(self) -> str:
        return f"PathRepeat({self.path!r}, {self.mod!r})"


class PathNegated(PropertyPath):
    """`!(a | ^b | ...)`: `args` are IRIs and inverse IRIs."""

    __slots__ = ("args",)

    def __init__(self, args: list[IriTerm | PathInverse]) -> None:
        self.args = list(args)

    def _key(self) -> tuple[Any, ...]:
        return tuple(self.args)

    def __repr__(self) -> str:
        return f"PathNegated({self.args!r})"


__all__ = [
    "AlgebraNode",
    "BlankTerm",
    "IriTerm",
    "LiteralTerm",
    "PathAlternative",
    "PathInverse",
    "PathNegated",
    "PathRepeat",
    "PathSequence",
    "PropertyPath",
    "RdfTerm",
    "Var",
]
