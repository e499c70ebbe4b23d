"""A small GraphQL document parser: just enough of the spec to execute what a client sends.

Operations (query/mutation, named or anonymous, with variable definitions and defaults), fields
with aliases and arguments, inline fragments, named fragments and spreads, ``@include``/``@skip``,
and every literal kind. It checks syntax only; checking a document against GitHub's schema is the
validator's job (graphql-core, on the test side), so the sandbox needs no GraphQL library.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


class GraphQLSyntaxError(ValueError):
    pass


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class EnumValue:
    name: str


@dataclass
class Directive:
    name: str
    args: dict[str, Any]


@dataclass
class Field:
    name: str
    alias: str | None
    args: dict[str, Any]
    directives: list[Directive]
    selections: list[Selection] | None

    @property
    def key(self) -> str:
        return self.alias or self.name


@dataclass
class InlineFragment:
    type_condition: str | None
    directives: list[Directive]
    selections: list[Selection]


@dataclass
class FragmentSpread:
    name: str
    directives: list[Directive]


Selection = Field | InlineFragment | FragmentSpread


@dataclass
class VariableDefinition:
    name: str
    type: str
    default: Any = None
    has_default: bool = False


@dataclass
class Operation:
    kind: str  # query | mutation | subscription
    name: str | None
    variables: list[VariableDefinition]
    selections: list[Selection]


@dataclass
class Document:
    operations: list[Operation] = field(default_factory=list)
    fragments: dict[str, InlineFragment] = field(default_factory=dict)

    def operation(self, name: str | None) -> Operation:
        if name:
            for op in self.operations:
                if op.name == name:
                    return op
            raise GraphQLSyntaxError(f"Unknown operation named {name!r}.")
        if len(self.operations) != 1:
            raise GraphQLSyntaxError("Must provide operation name if query contains multiple operations.")
        return self.operations[0]


_TOKEN = re.compile(
    r"""
    (?P<skip>[\s,\ufeff]+|\#[^\n\r]*)
  | (?P<block>\"\"\"(?:\\\"\"\"|[^"]|"(?!""))*\"\"\")
  | (?P<string>"(?:\\.|[^"\\\n\r])*")
  | (?P<number>-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<spread>\.\.\.)
  | (?P<name>[_A-Za-z][_0-9A-Za-z]*)
  | (?P<punct>[!$&()\:=@\[\]{}|])
    """,
    re.VERBOSE,
)


@dataclass
class _Tok:
    kind: str
    text: str
    pos: int


def _tokenize(source: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:
            raise GraphQLSyntaxError(f"Syntax Error: Unexpected character {source[pos]!r} at {pos}.")
        kind = match.lastgroup or ""
        if kind != "skip":
            tokens.append(_Tok(kind, match.group(), pos))
        pos = match.end()
    tokens.append(_Tok("eof", "", pos))
    return tokens


def _block_string(raw: str) -> str:
    lines = raw[3:-3].replace('\\"""', '"""').splitlines()
    indent = min((len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()), default=0)
    lines = [lines[0], *(x[indent:] for x in lines[1:])] if lines else []
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = _tokenize(source)
        self.i = 0

    # ---------------------------------------------------------------- token helpers
    def peek(self, offset: int = 0) -> _Tok:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def take(self) -> _Tok:
        tok = self.tokens[self.i]
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok.kind in ("punct", "spread", "name") and tok.text == text

    def expect(self, text: str) -> _Tok:
        tok = self.take()
        if tok.text != text or tok.kind == "string":
            found = tok.text or "<EOF>"
            raise GraphQLSyntaxError(f"Syntax Error: Expected {text!r}, found {found!r} at {tok.pos}.")
        return tok

    def name(self) -> str:
        tok = self.take()
        if tok.kind != "name":
            raise GraphQLSyntaxError(
                f"Syntax Error: Expected Name, found {tok.text or '<EOF>'!r} at {tok.pos}."
            )
        return tok.text

    # ---------------------------------------------------------------- document
    def document(self) -> Document:
        doc = Document()
        while self.peek().kind != "eof":
            if self.at("{"):
                doc.operations.append(Operation("query", None, [], self.selection_set()))
            elif self.at("fragment"):
                self.take()
                frag_name = self.name()
                self.expect("on")
                type_name = self.name()
                directives = self.directives()
                doc.fragments[frag_name] = InlineFragment(type_name, directives, self.selection_set())
            elif self.peek().kind == "name" and self.peek().text in ("query", "mutation", "subscription"):
                doc.operations.append(self.operation())
            else:
                tok = self.peek()
                raise GraphQLSyntaxError(f"Syntax Error: Unexpected {tok.text!r} at {tok.pos}.")
        if not doc.operations:
            raise GraphQLSyntaxError("Syntax Error: the document has no operation.")
        return doc

    def operation(self) -> Operation:
        kind = self.take().text
        op_name = self.name() if self.peek().kind == "name" else None
        variables: list[VariableDefinition] = []
        if self.at("("):
            self.take()
            while not self.at(")"):
                self.expect("$")
                var_name = self.name()
                self.expect(":")
                definition = VariableDefinition(var_name, self.type_ref())
                if self.at("="):
                    self.take()
                    definition.default = self.value(const=True)
                    definition.has_default = True
                self.directives()
                variables.append(definition)
            self.take()
        self.directives()
        return Operation(kind, op_name, variables, self.selection_set())

    def type_ref(self) -> str:
        if self.at("["):
            self.take()
            inner = self.type_ref()
            self.expect("]")
            text = f"[{inner}]"
        else:
            text = self.name()
        if self.at("!"):
            self.take()
            text += "!"
        return text

    def selection_set(self) -> list[Selection]:
        self.expect("{")
        selections: list[Selection] = []
        while not self.at("}"):
            if self.peek().kind == "eof":
                raise GraphQLSyntaxError("Syntax Error: Expected '}', found <EOF>.")
            selections.append(self.selection())
        self.take()
        if not selections:
            raise GraphQLSyntaxError("Syntax Error: empty selection set.")
        return selections

    def selection(self) -> Selection:
        if self.peek().kind == "spread":
            self.take()
            if self.at("on"):
                self.take()
                type_name = self.name()
                return InlineFragment(type_name, self.directives(), self.selection_set())
            if self.at("{") or self.at("@"):
                return InlineFragment(None, self.directives(), self.selection_set())
            spread_name = self.name()
            return FragmentSpread(spread_name, self.directives())
        first = self.name()
        alias, field_name = None, first
        if self.at(":"):
            self.take()
            alias, field_name = first, self.name()
        args = self.arguments()
        directives = self.directives()
        selections = self.selection_set() if self.at("{") else None
        return Field(field_name, alias, args, directives, selections)

    def arguments(self, *, const: bool = False) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if not self.at("("):
            return args
        self.take()
        while not self.at(")"):
            arg_name = self.name()
            self.expect(":")
            args[arg_name] = self.value(const=const)
        self.take()
        return args

    def directives(self) -> list[Directive]:
        found: list[Directive] = []
        while self.at("@"):
            self.take()
            found.append(Directive(self.name(), self.arguments()))
        return found

    def value(self, *, const: bool = False) -> Any:
        tok = self.peek()
        if tok.kind == "punct" and tok.text == "$" and not const:
            self.take()
            return Var(self.name())
        if tok.kind == "number":
            self.take()
            return float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text)
        if tok.kind == "string":
            self.take()
            decoded: str = json.loads(tok.text)
            return decoded
        if tok.kind == "block":
            self.take()
            return _block_string(tok.text)
        if tok.kind == "name":
            self.take()
            return {"true": True, "false": False, "null": None}.get(tok.text, EnumValue(tok.text))
        if self.at("["):
            self.take()
            items = []
            while not self.at("]"):
                items.append(self.value(const=const))
            self.take()
            return items
        if self.at("{"):
            self.take()
            obj: dict[str, Any] = {}
            while not self.at("}"):
                key = self.name()
                self.expect(":")
                obj[key] = self.value(const=const)
            self.take()
            return obj
        raise GraphQLSyntaxError(f"Syntax Error: Unexpected {tok.text or '<EOF>'!r} at {tok.pos}.")


def parse(source: str) -> Document:
    return _Parser(source).document()


def resolve_value(value: Any, variables: dict[str, Any]) -> Any:
    """Replace variable references by their values; enum literals become their names."""
    if isinstance(value, Var):
        return variables.get(value.name)
    if isinstance(value, EnumValue):
        return value.name
    if isinstance(value, list):
        return [resolve_value(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: resolve_value(v, variables) for k, v in value.items()}
    return value
