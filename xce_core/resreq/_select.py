"""Select expressions: parse once, print canonically, evaluate through closures.

``compile_select(text)`` turns LSF-style select text (``type==X86_64 && mem>4000``)
into a :class:`SelectExpr`. Each distinct text is parsed once: compiled objects
are cached by source text *and* by canonical text, so equal texts, and texts with
the same canonical form, give the very same object (one cache per
:class:`~xce_core.resreq.ResReqLimits`, so a text is never let through by a
cache filled under looser limits). A cache holds at most ``_CACHE_LIMIT``
entries and is emptied when full (identity then holds again from the next
compile on). User text is never passed to eval/exec/compile: evaluation is a
small tree of closures, with comparisons of a name against a constant fused
into one closure. The parser (``_select_parse``) uses no recursion; the
legacy ``a=1:b`` syntax is read by ``_select_legacy``.

Semantics (they follow LSF; "missing" means ``host.get(name)`` is ``None``):

* **Missing names.** A comparison with a missing operand is false for every
  operator, ``!=`` included. Arithmetic on a missing value is missing, and so is
  the whole arithmetic expression. A missing name used as a condition is false.
  ``defined(name)`` is true iff the host has the name. ``!`` simply negates, so
  ``!(gpu>0)`` is *true* on a host without ``gpu``; write
  ``defined(gpu) && !(gpu>0)`` to require the resource.
* **Booleans.** A name used as a condition is true when the host's value is
  truthy (``True``, a non-zero number, a non-empty string). In comparisons and
  arithmetic ``True``/``False`` are 1/0.
* **Strings.** ``==``/``!=`` compare by value; ``< > <= >=`` lexicographically.
  A string compared with a number (or bool) is false for every operator, ``!=``
  included; arithmetic on a string is missing. Nothing ever raises.
* **Bare words.** In ``name OP word``, where both sides are bare names (after
  removing parentheses), the right-hand ``word`` reads the host's value of
  ``word`` if it has one and is otherwise the string ``'word'``. So
  ``type==X86_64`` compares ``type`` to the string ``X86_64`` (unless a host
  defines a resource literally named ``X86_64``) while ``mem>maxmem`` compares two
  resources. Anywhere else a bare name is a resource. Dotted words such as
  ``LINUX2.4`` are always string constants. Quote a value to force a string.
* **any/local.** ``type==any``, ``model==any``, ``type==local`` and
  ``model==local`` (bare, lower-case words) are true on every host, even one
  without ``type``/``model``; with ``!=`` they are false everywhere. ``local``
  would mean "the submission host's type" in LSF; xce has no submission host, so
  it means ``any``. Quoted, ``type=='any'`` compares with the string ``any``.
* **Arithmetic.** ``+ - * /`` on numbers; division by zero or overflow is
  missing.
* **Precedence**, loosest first: ``||``, ``&&``, comparisons (which do not
  chain: ``a<b<c`` is an error), ``+ -``, ``* /``, then the prefix ``!`` and
  unary ``-``, as in LSF's operator table. ``!a`` is 1 where ``a`` is false
  (0, or missing) and 0 elsewhere, so ``!a==b`` means ``(!a)==b`` and
  ``!swp>100`` is never true: write ``!(swp>100)``.
* A string constant is not a condition: ``select['x']`` and ``'x' && a`` are
  errors (``('x')=='x'`` is fine).
* **Aliases.** LSF's alternative names of load indices, ``swap idle login cpu``,
  read ``swp it ls r1m`` (``cpu<0.5`` is ``r1m<0.5``). A bare word right of a
  comparison is not a resource, so it is not an alias (``type==cpu``).
* **defined(name)** takes a configured resource: a built-in (``mem``, ``type``,
  ``model``, ``ncpus``, ... see ``_names``), always defined, is an error.

Canonical text: operators ``&& || ! ==`` (keywords and ``=`` are normalised),
`` && `` and `` || `` with one space on each side and no other spaces, the
fewest parentheses precedence allows except that ``!`` puts parentheses around
anything but a name, constant, ``defined(...)`` or another ``!`` (``!(-a)``), numbers as
:func:`~xce_core.resreq._lex.format_number` prints them, string constants in
single quotes (double quotes if the value contains ``'``). Nested ``&&``/``||``
chains are flattened. ``compile_select(e.text) is e``.
"""

from __future__ import annotations

from typing import Final

from xce_core._errors import ResReqSyntaxError
from xce_core.resreq._limits import DEFAULT_LIMITS, ResReqLimits
from xce_core.resreq._select_eval import compile_test
from xce_core.resreq._select_legacy import is_legacy, parse_legacy_select
from xce_core.resreq._select_parse import parse_select
from xce_core.resreq._select_tree import Node, format_node, node_names
from xce_core.resreq._tree import SelectExpr

__all__ = ["compile_select", "compile_select_span"]

_CACHE_LIMIT: Final = 100_000
_CACHE: dict[str, SelectExpr] = {}  # for DEFAULT_LIMITS, the common case
_OTHER_CACHES: dict[ResReqLimits, dict[str, SelectExpr]] = {}
_OTHER_CACHES_LIMIT: Final = 16


def _cache_for(limits: ResReqLimits) -> dict[str, SelectExpr]:
    """The cache of what passed ``limits``: a text accepted under looser limits
    must be checked again under tighter ones."""
    if limits == DEFAULT_LIMITS:
        return _CACHE
    cache = _OTHER_CACHES.get(limits)
    if cache is None:
        if len(_OTHER_CACHES) >= _OTHER_CACHES_LIMIT:
            _OTHER_CACHES.clear()
        cache = _OTHER_CACHES[limits] = {}
    return cache


def _parse(source: str, start: int, end: int, limits: ResReqLimits) -> Node:
    if is_legacy(source, start, end):
        return parse_legacy_select(source, start, end, limits)
    return parse_select(source, start, end, limits)


def _compile_node(node: Node, text: str) -> SelectExpr:
    words: set[str] = set()
    resources = frozenset(node_names(node, set(), words))
    return SelectExpr(
        text=text, names=resources | words, evaluate=compile_test(node), resources=resources
    )


def _compile_uncached(text: str, limits: ResReqLimits = DEFAULT_LIMITS) -> SelectExpr:
    """Parse and compile without touching the cache (tests compare against it)."""
    node = _parse(text, 0, len(text), limits)
    return _compile_node(node, format_node(node))


def compile_select_span(
    source: str, start: int, end: int, limits: ResReqLimits = DEFAULT_LIMITS
) -> SelectExpr:
    """Compile ``source[start:end]``; errors carry ``source`` and absolute columns.

    This is what the requirement parser uses for ``select[...]``, so a mistake
    inside the brackets is reported at its column in the whole requirement.
    Cached like :func:`compile_select` (per ``limits``). Raises only
    ResReqSyntaxError, also for text beyond ``limits``.
    """
    cache = _CACHE if limits is DEFAULT_LIMITS else _cache_for(limits)
    key = source[start:end]
    cached = cache.get(key)
    if cached is not None:
        return cached
    node = _parse(source, start, end, limits)
    text = format_node(node)
    expr = cache.get(text)
    if expr is None:
        expr = _compile_node(node, text)
    if len(cache) >= _CACHE_LIMIT - 1:
        cache.clear()
    cache[text] = expr
    cache[key] = expr
    return expr


def compile_select(
    text: str, *, offset: int = 0, limits: ResReqLimits | None = None
) -> SelectExpr:
    """Compile select text (the inside of ``select[...]``) into a :class:`SelectExpr`.

    Idempotent and cached: the same text, or any text with the same canonical
    form, returns the very same object, and ``compile_select(e.text) is e``
    (under the same ``limits``; default :data:`~xce_core.resreq.DEFAULT_LIMITS`).
    Raises ResReqSyntaxError (never anything else) for bad text or text beyond
    ``limits``; its ``text`` is ``text`` and its ``column`` is ``offset`` plus
    the 0-based column in ``text``, for callers that embed ``text`` at
    ``offset`` in a larger string (to report the larger string itself, use
    :func:`compile_select_span`). See the module docstring for the grammar and
    the meaning of missing names and bare words.
    """
    limits = limits or DEFAULT_LIMITS
    try:
        if len(text) > limits.max_length:  # parse_resreq checks whole requirements
            limits.exceeded(
                "max_length", f"a select of {len(text)} characters", text, limits.max_length
            )
        return compile_select_span(text, 0, len(text), limits)
    except ResReqSyntaxError as error:
        if not offset:
            raise
        raise ResReqSyntaxError(error.message, error.text, error.column + offset) from None
