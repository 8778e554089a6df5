"""What env code may reach, as data: the (module, attribute) pairs, the builtins, the interpreter's internals. Host side.

:mod:`factory.validation.static` enforces one rule over these lists. They are closed: a pair, a builtin or a
module that is not listed here is refused, so a new way to reach something needs a new entry, never a new
refusal. For the stdlib every allowed attribute is written out; modules of pure computation take their whole
public API. The SDK and kits are the project's own code: their public API is read from the modules, less
anything that is itself a module.

Left out on purpose (each reaches attributes or code by name, builds classes from a computed dict, or changes
state shared with the trusted code in the same process): ``operator.attrgetter``/``methodcaller``,
``functools.wraps``/``update_wrapper``/``singledispatch``/``singledispatchmethod``, ``string.Formatter``,
``typing.get_type_hints``/``ForwardRef``, ``typing.get_origin`` (it hands back the class behind an alias:
``get_origin(typing.Type)`` is ``type``), ``dataclasses.make_dataclass``, ``random.seed``/``setstate`` (the
process-wide generator; drawing from it is left to the determinism check), ``decimal.getcontext``/``setcontext``,
``calendar.setfirstweekday``/``mdays``, ``re.purge``. Checked and left in, since they look names up only among
values the file itself declared or read items, never attributes: ``string.Template`` (mapping items),
``%``-formatting (items), ``enum`` member look-up by name (``Color["RED"]``), ``dataclasses.replace``/``fields``
(declared fields), ``operator.itemgetter``, ``hashlib.new`` (an algorithm name), ``typing.NewType``/``TypeVar``
(a label). ``str.format`` is kept to templates the lint reads (:mod:`factory.validation.static_format`).
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import types
from functools import lru_cache
from typing import Any, Literal, Union

ALL_PUBLIC: Literal["*"] = "*"
#: SDK modules (the legacy ``env_registry.sdk`` spelling is served by the same module inside the sandbox).
SDK_ALIASES = {"trace_env.sdk": "trace_env.sdk", "env_registry.sdk": "trace_env.sdk"}
KITS_PACKAGE = "trace_env.kits"

#: stdlib module -> the attributes env code may reach (``ALL_PUBLIC``: every public name that is not a module).
STDLIB: dict[str, Union[frozenset[str], Literal["*"]]] = {
    "__future__": frozenset({"annotations"}),
    "abc": frozenset({"ABC", "ABCMeta", "abstractmethod", "abstractproperty", "abstractclassmethod",
                      "abstractstaticmethod"}),
    "bisect": ALL_PUBLIC,
    "calendar": frozenset({
        "isleap", "leapdays", "monthrange", "weekday", "monthcalendar", "month_name", "month_abbr", "day_name",
        "day_abbr", "timegm", "firstweekday", "Calendar", "TextCalendar", "IllegalMonthError", "IllegalWeekdayError",
        "MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY", "month", "calendar", "weekheader",
    }),
    "collections": frozenset({"Counter", "OrderedDict", "defaultdict", "deque", "namedtuple", "ChainMap", "UserDict",
                              "UserList", "UserString"}),
    "copy": frozenset({"copy", "deepcopy", "Error"}),
    "dataclasses": frozenset({"dataclass", "field", "fields", "asdict", "astuple", "replace", "is_dataclass",
                              "FrozenInstanceError", "InitVar", "KW_ONLY", "MISSING", "Field"}),
    "datetime": frozenset({"date", "datetime", "time", "timedelta", "timezone", "tzinfo", "MINYEAR", "MAXYEAR", "UTC"}),
    "decimal": frozenset({
        "Decimal", "Context", "localcontext", "DecimalException", "InvalidOperation", "DivisionByZero", "Inexact",
        "Rounded", "Overflow", "Underflow", "Clamped", "Subnormal", "FloatOperation", "ROUND_DOWN", "ROUND_HALF_UP",
        "ROUND_HALF_EVEN", "ROUND_CEILING", "ROUND_FLOOR", "ROUND_UP", "ROUND_HALF_DOWN", "ROUND_05UP",
    }),
    "enum": frozenset({"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "auto", "unique"}),
    "fractions": ALL_PUBLIC,
    "functools": frozenset({"partial", "reduce", "lru_cache", "cache", "cached_property", "total_ordering",
                            "cmp_to_key", "partialmethod"}),
    "hashlib": frozenset({"md5", "sha1", "sha224", "sha256", "sha384", "sha512", "blake2b", "blake2s", "sha3_224",
                          "sha3_256", "sha3_384", "sha3_512", "shake_128", "shake_256", "new"}),
    "heapq": ALL_PUBLIC,
    "itertools": ALL_PUBLIC,
    "json": frozenset({"dumps", "loads", "JSONDecodeError", "JSONEncoder", "JSONDecoder"}),
    "math": ALL_PUBLIC,
    "numbers": ALL_PUBLIC,
    "operator": frozenset({
        "abs", "add", "and_", "call", "concat", "contains", "countOf", "delitem", "eq", "floordiv", "ge", "getitem",
        "gt", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul", "imod", "imul", "index", "indexOf",
        "inv", "invert", "ior", "ipow", "irshift", "is_", "is_not", "isub", "itemgetter", "itruediv", "ixor", "le",
        "length_hint", "lshift", "lt", "matmul", "mod", "mul", "ne", "neg", "not_", "or_", "pos", "pow", "rshift",
        "setitem", "sub", "truediv", "truth", "xor",
    }),
    "random": frozenset({
        "Random", "SystemRandom", "random", "uniform", "triangular", "randint", "randrange", "choice", "choices",
        "shuffle", "sample", "gauss", "normalvariate", "lognormvariate", "expovariate", "vonmisesvariate",
        "gammavariate", "betavariate", "paretovariate", "weibullvariate", "getrandbits", "randbytes",
    }),
    "re": frozenset({"compile", "match", "search", "fullmatch", "findall", "finditer", "sub", "subn", "split", "escape",
                     "error", "Pattern", "Match", "RegexFlag", "NOFLAG", "IGNORECASE", "I", "MULTILINE", "M", "DOTALL",
                     "S", "VERBOSE", "X", "ASCII", "A", "UNICODE", "U"}),
    "statistics": ALL_PUBLIC,
    "string": frozenset({"ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits", "octdigits",
                         "punctuation", "printable", "whitespace", "capwords", "Template"}),
    "textwrap": frozenset({"dedent", "indent", "fill", "wrap", "shorten", "TextWrapper"}),
    "typing": frozenset({
        "Any", "Optional", "Union", "List", "Dict", "Tuple", "Set", "FrozenSet", "Type", "Iterable", "Iterator",
        "Sequence", "MutableSequence", "Mapping", "MutableMapping", "AbstractSet", "MutableSet", "Collection",
        "Container", "Hashable", "Sized", "Reversible", "Generator", "Callable", "Awaitable", "Coroutine",
        "AsyncIterable", "AsyncIterator", "DefaultDict", "Counter", "Deque", "OrderedDict", "ChainMap", "TypeVar",
        "Generic", "Protocol", "Literal", "Final", "ClassVar", "NamedTuple", "TypedDict", "Required", "NotRequired",
        "Annotated", "NoReturn", "Never", "Self", "LiteralString", "TypeAlias", "ParamSpec", "Concatenate",
        "SupportsInt", "SupportsFloat", "SupportsIndex", "SupportsAbs", "SupportsRound", "AnyStr", "Text", "NewType",
        "TYPE_CHECKING", "cast", "overload", "final", "runtime_checkable", "get_args", "assert_never",
        "assert_type", "reveal_type",
    }),
}

#: Callables that turn strings into a class and its field names (the functional forms): allowed only as a base
#: class, so the fields are written as a class body the lint reads.
STRING_CLASS_BUILDERS = frozenset({("typing", "NamedTuple"), ("typing", "TypedDict"), ("collections", "namedtuple")})

#: Builtins env code may name. Every other builtin (getattr, vars, eval, exec, compile, open, type, id, hash,
#: input, breakpoint, globals, locals, dir, memoryview, help, exit...) is refused wherever it appears.
BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod", "complex",
    "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "int", "isinstance", "issubclass",
    "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "ord", "pow", "print", "property", "range",
    "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "zip",
    "aiter", "anext", "True", "False", "None", "Ellipsis", "NotImplemented",
    *(name for name in dir(builtins) if isinstance(getattr(builtins, name), type) and issubclass(
        getattr(builtins, name), BaseException)),
})
FORBIDDEN_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_")) - BUILTINS


def _data_attributes(*kinds: type) -> frozenset[str]:
    import inspect

    names = set()
    for kind in kinds:
        for name in dir(kind):
            if not name.startswith("_") and (inspect.isdatadescriptor(inspect.getattr_static(kind, name))):
                names.add(name)
    return frozenset(names)


#: Attributes of the interpreter's frames, code, generators, coroutines, tracebacks and cells (read from the
#: ``types`` module, so the list is whatever this interpreter has), plus ``type.mro``: the ways from an ordinary
#: value to another scope's variables or to code.
INTERNAL_ATTRIBUTES = _data_attributes(
    types.FrameType, types.CodeType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType,
    types.TracebackType, types.CellType,
) | {"mro", "co_lines", "co_positions"}

#: Attribute names refused on any value: reflection under another object's name (``x.getattr``).
REFLECTION_ATTRIBUTES = frozenset({"getattr", "hasattr", "setattr", "delattr", "vars", "globals", "locals", "eval",
                                   "exec", "breakpoint"})


# --- what the allowed modules hold (host-side imports of allow-listed stdlib, SDK and kit modules, cached) ---


def canonical(name: str) -> str:
    return SDK_ALIASES.get(name, name)


def module_allowed(name: str) -> bool:
    if name in STDLIB or name in SDK_ALIASES:
        return True
    return name.startswith(KITS_PACKAGE + ".") and _kit_exists(name)


@lru_cache(maxsize=None)
def _kit_exists(name: str) -> bool:
    rest = name[len(KITS_PACKAGE) + 1:]
    if not rest or any(not part.isidentifier() or part.startswith("_") for part in rest.split(".")):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@lru_cache(maxsize=None)
def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(canonical(name))
    except Exception:  # noqa: BLE001 - an unimportable kit: nothing of it is allowed
        return None


MISSING = object()


def value_of(module: str, attr: str) -> Any:
    """``module.attr`` as the host sees it (a kit's submodule is imported for the look-up), or MISSING."""
    mod = _module(module)
    if mod is None or attr.startswith("_"):
        return MISSING
    value = getattr(mod, attr, MISSING)
    if value is MISSING and canonical(module).startswith(KITS_PACKAGE) and module_allowed(f"{canonical(module)}.{attr}"):
        value = _module(f"{canonical(module)}.{attr}") or MISSING
    return value


@lru_cache(maxsize=None)
def pair_allowed(module: str, attr: str) -> bool:
    """Is ``module.attr`` on the allowlist? stdlib: as listed; SDK and kits: their public API, less modules.
    A submodule is allowed only where it is itself an allowed module (``trace_env.kits.<kit>``)."""
    module = canonical(module)
    value = value_of(module, attr)
    if value is MISSING:
        return False
    if isinstance(value, types.ModuleType):
        return module_allowed(value.__name__)
    listed = STDLIB.get(module)
    if listed is not None:
        return listed == ALL_PUBLIC or attr in listed
    return module == "trace_env.sdk" or module == KITS_PACKAGE or module.startswith(KITS_PACKAGE + ".")


def is_factory(value: Any) -> bool:
    """Does calling ``value`` with a name and a dict build a class? (metaclasses; enum classes' functional API)"""
    import enum

    return isinstance(value, type) and (issubclass(value, type) or isinstance(value, enum.EnumMeta))


def is_metaclass(value: Any) -> bool:
    """A factory whose instances are classes: as a base it makes another one, and an enum mixed with it builds its
    members as classes from the member values (so it may appear only as ``metaclass=``)."""
    return isinstance(value, type) and issubclass(value, type)
