"""What a graded program's source may do: build and run its graph through TensorFlow's
public API, and change nothing of TensorFlow's, Python's or the grader's own.

A graded TensorFlow program runs in a process that also exports its graph for grading. Python
cannot keep a program from changing that process's code (``op._set_attr`` after its session
took the graph, a patched ``export_meta_graph``, a frame's globals): so the grader reads the
program's source first, in its own process, and grades only a program that keeps to:

- imports of the modules a training program needs (:data:`MODULES`), none of its own files
  and none of TensorFlow's internals (``tensorflow.python``);
- no name or attribute of Python's machinery: nothing that starts with ``_`` but its own
  (``self._x``, its own functions), no ``__dunder__`` but :data:`DUNDERS` (nor as a
  keyword or a string: :data:`STRINGS`), no name computed at run time that becomes an
  attribute (:data:`NAMERS`, :data:`ENUMS`, the flags), no frames,
  tracebacks or code objects (``tb_frame``, ``f_globals``), no
  ``exec``, ``eval``, ``compile``, ``setattr``, ``globals``, ``vars`` or ``getattr`` of a
  name it computes;
- attributes set only on its own objects: ``self``, an instance of its own class, or an
  options object it made (``tf.compat.v1.ConfigProto()``); never on a module, a class of
  TensorFlow's or anything reached from one;
- classes of its own that derive from :data:`BASES` only, and define no ``__new__``,
  ``__getattr__`` or metaclass;
- nothing that loads native code or pickles (``tf.load_op_library``,
  ``np.load(..., allow_pickle=True)``).

A program that breaks a rule is not run: one line names the file, the line and the rule.

>>> print(check_source("import tensorflow as tf\\nop = tf.no_op()\\nop._set_attr('T', 1)\\n"))
... # doctest: +NORMALIZE_WHITESPACE
line 3: `op._set_attr` reaches into a part of TensorFlow or Python that is not its public
API (a name that starts with '_'): use TensorFlow's public API
>>> check_source("import tensorflow as tf\\nconfig = tf.compat.v1.ConfigProto()\\n"
...              "config.gpu_options.allow_growth = True\\n") is None
True
"""

from __future__ import annotations

import ast
import itertools
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

from simsync.grading.resolver import resolve

__all__ = [
    "BASES",
    "GUARDED",
    "GUARDED_CLASSES",
    "MODULES",
    "MOST_BYTES",
    "YET_TOPS",
    "check_program",
    "check_source",
    "program_paths",
]

#: modules (and their submodules) a graded program may import
MODULES = frozenset(
    {
        *("__future__", "abc", "absl", "argparse", "bisect", "collections", "concurrent"),
        *("contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "enum"),
        *("fractions", "functools", "glob", "gzip", "hashlib", "heapq", "io", "itertools", "json"),
        *("keras", "logging", "math", "numbers", "numpy", "os", "pathlib", "platform"),
        *("pprint", "queue", "random", "re", "shutil", "statistics", "struct", "sys"),
        *("tempfile", "tensorflow", "textwrap", "threading", "time", "typing", "warnings"),
    }
)
#: modules below :data:`MODULES` that are not: internals, native code, code from text
NOT_MODULES = (
    *("numpy.ctypeslib", "numpy.f2py", "logging.config", "keras.src"),
    # test helpers that patch objects by name (mock) or run code from strings, native code
    *("numpy.testing", "absl.testing", "tensorflow.lite", "tensorflow.compat.v1.lite"),
    "concurrent.futures.process",
    # every name of numpy again, under another path (the twenty-ninth attack's
    # numpy.matlib.load, which is np.load)
    "numpy.matlib",
)
#: TensorFlow's public modules (the rest of it is internals: ``tensorflow.python``)
TENSORFLOW = ("tensorflow.compat", "tensorflow.keras", "tensorflow.core.protobuf")
#: ... and single modules a graded program may import all the same
YET_MODULES = frozenset(
    {
        "tensorflow.python.client.timeline",
        "tensorflow.python.client.device_lib",
        "traceback",
        *("six.moves.xrange", "six.moves.range", "six.moves.zip", "six.moves.map"),
    }
)
#: ... of which a program may use only these names, and the module itself only by them (not
#: as a value): the rest of the module is what it imports, TensorFlow's internals (the
#: twenty-seventh attack reached ``timeline.logging``) or frames (``traceback.walk_stack``)
YET_NAMES = {
    "tensorflow.python.client.timeline": frozenset({"Timeline"}),
    # how many GPUs: the idiom of multi-GPU programs older than tf.config
    "tensorflow.python.client.device_lib": frozenset({"list_local_devices"}),
    # an error's report, as text
    "traceback": frozenset(
        {"print_exc", "format_exc", "print_exception", "format_exception", "print_stack"}
    ),
}
#: what may be handed ``vars(x)`` (a live mapping of any attribute, by a name it computes): a
#: call that only writes it out as text
TEXT_TAKERS = frozenset({"print", "str", "repr"})

#: Python's own names that change or reach code and objects by name
NOT_NAMES = frozenset(
    {
        *("setattr", "delattr", "exec", "eval", "compile", "globals", "locals", "vars"),
        *("breakpoint", "type"),
    }
)
#: attribute names that reach Python's machinery, native code or code from data
NOT_ATTRIBUTES = frozenset(
    {
        *(NOT_NAMES - {"eval", "compile", "type"}),  # tensor.eval(), model.compile()
        "getattr",
        # frames, tracebacks, generators and code: their globals are the grader's too
        *("tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code"),
        *("gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code"),
        *("co_code", "co_consts", "co_names", "currentframe", "get_type_hints"),
        # the import system, tracing, and modules that reach them (as another's attribute)
        *("modules", "meta_path", "path_hooks", "path_importer_cache", "import_module"),
        *("settrace", "setprofile", "addaudithook", "settrace_all_threads", "reload"),
        # the debugger, which runs commands from a file or the standard input (the
        # thirty-second attack: sys.breakpointhook(), absl's --run_with_pdb)
        *("breakpointhook", "run_with_pdb", "pdb_post_mortem", "StrFormatStyle"),
        # code from a string annotation (singledispatch evaluates it), another module's
        # class or attributes rewritten, a process pool (new processes), absl's Flag by a
        # computed name, the interpreter's display hook (the thirty-second attack)
        *("singledispatch", "singledispatchmethod", "total_ordering", "no_type_check"),
        *("ProcessPoolExecutor", "Flag", "displayhook", "excepthook"),
        # operator's getters by a name given as data, which other modules hold too (the
        # thirty-first attack's pathlib.attrgetter read a function's __globals__)
        *("attrgetter", "methodcaller"),
        *("sys", "builtins", "importlib", "inspect", "gc", "types", "weakref", "operator"),
        *("pickle", "cPickle", "marshal", "copyreg", "copy_reg", "ctypes", "runpy", "code"),
        *("linecache", "traceback", "subprocess", "socket", "timeit", "get_field"),
        # copying attributes by name between objects, a method's own function
        *("update_wrapper", "wraps", "python_function", "fget", "fset", "fdel", "func"),
        # native code, and memory by hand
        *("load_op_library", "load_library", "register_filesystem_plugin", "ctypeslib"),
        *("load_file_system_library", "FileSystemSetConfiguration"),
        *("as_strided", "f2py", "python", "enable_unsafe_deserialization"),
        # code from bytes (Keras's marshal), and another program in this process's place,
        # whose code no rule reads
        *("func_load", "func_dump", "execl", "execle", "execlp", "execlpe", "execv"),
        *("execve", "execvp", "execvpe"),
        # modules other modules hold under names of their own: builtins, mock, debuggers
        *("bltns", "mock", "pdb", "bdb", "pkgutil", "posix"),
        # what makes attributes, or classes, of names given as data (a dunder among them:
        # an object with an __array_interface__ has numpy read and write memory anywhere)
        *("makeLogRecord", "make_dataclass", "ABCMeta", "EnumMeta", "EnumType", "Config"),
        *("makeRecord", "LoggerAdapter", "setLogRecordFactory", "FlagValues"),
        # the types module's classes, which other modules hold (dataclasses.FunctionType
        # makes a function of a code object, contextlib.MethodType binds any function)
        *("FunctionType", "MethodType", "CodeType", "LambdaType", "ModuleType"),
        *("DynamicClassAttribute", "MappingProxyType", "MethodDescriptorType"),
        *("MethodWrapperType", "WrapperDescriptorType", "SimpleNamespace", "new_class"),
        # a class handed back as data: the one a masked array wraps, the class behind a
        # type hint, a dataclass field's hinted type (the thirty-third attack's numpy array
        # class, called with a buffer)
        *("baseclass", "get_origin", "get_args", "fields"),
    }
)
#: names that set how TensorFlow rewrites or compiles a graph in the program's own session
#: (Grappler's options, mixed precision, XLA), or that fill a session's options from bytes:
#: those options live in the process that runs the program, whose word the grader does not
#: take, and the grader measures the graph as TensorFlow's defaults run it. Refused as an
#: attribute, a keyword or a string
REWRITING = frozenset(
    {
        *("graph_options", "rewrite_options", "optimizer_options", "GraphOptions"),
        *("RewriterConfig", "OptimizerOptions", "global_jit_level", "set_jit"),
        *("set_experimental_options", "auto_mixed_precision", "auto_mixed_precision_mkl"),
        *("auto_mixed_precision_onednn_bfloat16", "auto_mixed_precision_cpu"),
        *("ParseFromString", "MergeFromString", "FromString"),
        # the optimizer's wrapper that turns on Grappler's mixed precision for the process
        *("enable_mixed_precision_graph_rewrite", "disable_mixed_precision_graph_rewrite"),
    }
)
#: the environment's variables a graded program may set. Others change how TensorFlow and
#: the libraries under it rewrite and compute the graph in the student's own process (XLA's
#: ``TF_XLA_FLAGS``, oneDNN's ``TF_ENABLE_ONEDNN_OPTS`` and ``ONEDNN_MAX_CPU_ISA``, which the
#: twenty-fifth attack used to round a ``MatMul`` otherwise), which the grader's does not
#: see: its log level is only words, which GPUs it may use, their order and how their
#: memory grows none of the grader's CPUs, and Python's hash seed is read only as an
#: interpreter starts (a program sets it for one it would start, which it may not)
ENVIRONMENT_ALLOWED = frozenset(
    {
        *("TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MIN_VLOG_LEVEL"),
        *("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TF_FORCE_GPU_ALLOW_GROWTH"),
        "PYTHONHASHSEED",
    }
)
#: what holds or sets the environment's variables: reached only as :data:`ENVIRONMENT_USES`
#: say (the twenty-fifth attack set them through ``env = os.environ`` and ``from os import
#: putenv``, which named no ``os.environ`` item)
ENVIRONMENT = frozenset({"os.environ", "os.environb", "os.putenv", "os.unsetenv"})
#: the methods of ``os.environ`` a program may call: reads, the writes checked, and ``pop``
#: (a variable unset leaves TensorFlow's defaults, which the grader measures with)
ENVIRONMENT_USES = frozenset(
    {"get", "setdefault", "update", "keys", "items", "values", "copy", "pop"}
)
#: what is said of a name of :data:`REWRITING`
REWRITING_SAID = (
    "which sets how TensorFlow rewrites or compiles the graph in your own session: the "
    "grader measures your graph as TensorFlow's defaults run it, so keep them"
)
#: module attributes that are not, by the end of their name (``sys.path``: imports)
NOT_MODULE_ATTRIBUTES = ("sys.path",)
#: dunder names a program may use, and read off anything (strings)
DUNDERS = frozenset({"__name__", "__file__", "__doc__", "__version__", "__all__", "__author__"})
#: ... and as strings: the rest name attributes that reach Python's or numpy's machinery
#: (the twenty-ninth attack made an object whose ``__array_interface__`` it set by a
#: keyword: numpy then read and wrote memory at any address)
STRINGS = DUNDERS | {"__main__"}
#: decorators of a method that pass it its own object (as well as ``property``, its
#: setters and ``classmethod``), by the full name a module gives them
DECORATORS = frozenset(
    {
        *("tensorflow.function", "tensorflow.compat.v1.function"),
        "tensorflow.Module.with_name_scope",
        *("functools.cached_property", "functools.lru_cache", "functools.cache"),
        "abc.abstractmethod",
    }
)
#: dunder methods its classes may define
METHODS = frozenset(
    {
        *("__init__", "__call__", "__repr__", "__str__", "__len__", "__iter__", "__next__"),
        *("__enter__", "__exit__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__"),
        *("__ge__", "__hash__", "__getitem__", "__contains__", "__bool__"),
        "__post_init__",  # a dataclass's, called by its own __init__ with its own object
    }
)
#: the classes its own may derive from: Python's, by their own names, and those of the
#: modules it imports (the last part of the name they import)
BUILTIN_BASES = frozenset({"object", "Exception", "ValueError", "RuntimeError", "TypeError"})
BASES = frozenset(
    {"Enum", "IntEnum", "NamedTuple", "Thread", "SessionRunHook", "Model", "Layer", "Module"}
    | {"Callback", "ABC"}
)
#: what makes a tuple class of its own
NAMEDTUPLES = frozenset({"collections.namedtuple"})
#: options objects a program may set attributes of, once it made them: TensorFlow's
#: protocol buffers, whose fields hold no module (an argparse Namespace would)
OPTIONS = frozenset(
    {
        *("ConfigProto", "GPUOptions", "GraphOptions", "OptimizerOptions", "RunOptions"),
        *("RunMetadata", "RewriterConfig"),
    }
)
#: a program's flags (``FLAGS.learning_rate = 0.1``): setting one sets a flag it defined
#: (absl refuses any other name), by the full name a module gives them
FLAGS = frozenset(
    {
        *("absl.flags.FLAGS", "absl.app.FLAGS", "tensorflow.compat.v1.flags.FLAGS"),
        "tensorflow.compat.v1.app.flags.FLAGS",
    }
)
#: a parser's methods that take a namespace, second by place
PARSES = frozenset(
    {"parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args"}
)
#: what makes a parser, whose ``parse_args()`` (given no namespace) makes a new namespace
PARSERS = frozenset({"argparse.ArgumentParser"})
#: names a ``namedtuple`` gives its methods, public though they start with '_'
TUPLE_NAMES = frozenset({"_replace", "_asdict", "_fields", "_make"})
#: calls that may take a class of the program's own as it is
CLASS_TAKERS = frozenset({"isinstance", "issubclass", "super"})
#: numpy's makers of an array over memory it is handed (a buffer, a file mapped, records
#: from bytes) and the modules that hold them: an array of Python objects over bytes a program
#: wrote is any object at any address, so its process's memory, the answer's key among it
#: (the thirty-second attack's ``np.ndarray((1,), dtype=object, buffer=...)``, and
#: ``np.rec.fromstring``, ``np.recarray(buf=...)``, ``np.memmap``); ``numpy.core`` is an old
#: name of numpy's internals
MEMORY_MAKERS = frozenset(
    {"numpy.rec", "numpy.recarray", "numpy.memmap", "numpy.core", "numpy.lib.format"}
)
#: ... and the class of them all, which is a maker too when called: only tested
#: (``isinstance(x, np.ndarray)``) or named in a type hint
ARRAY_CLASS = "numpy.ndarray"
#: the top modules of :data:`YET_MODULES`
YET_TOPS = frozenset(module.partition(".")[0] for module in YET_MODULES)
#: keyword arguments that load code from data, unless given their safe value
NOT_KEYWORDS = {"allow_pickle": False, "safe_mode": True}
#: functions that load data which could hold code, unless told not to by those keywords:
#: called by their names only, never passed as values (the twenty-eighth attack ran a
#: pickle through ``functools.partial(np.load, ...)``, ``Thread(target=np.load, ...)`` and
#: ``np.load(*[f, None, True])``), and given only their file by place
LOADERS = frozenset(
    {"load_model", "read_array", "model_from_json", "from_config", "deserialize",
     "deserialize_keras_object", "NpzFile"}
)  # fmt: skip
#: ... by their full names, where their own name says nothing (``np.load``)
LOADER_PATHS = frozenset({"numpy.load"})
#: keyword arguments that set attributes by name on an object passed
NAMESPACES = frozenset({"namespace"})
#: what makes attributes of the names it is given (an argparse option's ``dest``, an absl
#: flag; and every ``DEFINE...``): only called, by its name, its names written out; as a
#: value (an alias, a partial) its names would be out of sight (the thirtieth attack:
#: ``add = p.add_argument; add('--x', dest=name)``, name ``__array_interface__``)
NAMERS = frozenset({"add_argument", "add_subparsers"})
#: logging's calls, which take ``extra``: a mapping whose keys become a record's attributes
LOG_CALLS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
)
#: the enum module's classes: a class's base only (called, they make a class of the names
#: they are given: ``E = enum.Enum; E('C', {name: ...})``)
ENUMS = frozenset({"Enum", "IntEnum", "Flag", "IntFlag", "StrEnum", "ReprEnum"})
#: classes a class pattern of one positional pattern matches as a whole (``case int(n)``)
SELF_MATCHED = frozenset(
    {"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str"}
    | {"tuple"}
)
#: methods that fill a format's fields: a field reads attributes and items off what it is
#: given (``"{0.__closure__}"``), so a format is written out, its fields plain (the
#: thirty-first attack read the key that seals the answers with a format it built at run
#: time, where no string named a dunder)
FORMATTERS = frozenset({"format", "format_map"})
#: logging's format styles whose fields read no attribute (``"{"`` is ``str.format``'s)
PLAIN_STYLES = ("%", "$")
#: what takes a logging format and its style
LOGGING_FORMATS = frozenset({"logging.Formatter", "logging.basicConfig"})
#: absl's flags that run the debugger, which runs commands from a file or the input: refused
#: in strings too (an argv written out)
DEBUGGER_FLAGS = ("run_with_pdb", "pdb_post_mortem")
#: the most bytes of source read
MOST_BYTES = 2**20
#: the most nodes of its syntax tree a source may have: the largest program given with
#: simsync has 770, and the rules take about 20 µs a node (1 MiB of ``a < a < ...``, 750,000
#: of them, took 14 s of the grader's own time)
MOST_PARTS = 100_000

PUBLIC = "use TensorFlow's public API"
#: what a module of :data:`NOT_MODULES` (or an internal one) is, said where it is refused
NOT_USED = "a module a graded program may not use (internals, test helpers, native code)"


#: the objects the rules name by their paths: reached under another path (``np.ma.core
#: .ndarray``, ``logging.handlers.logging.Formatter``), each is checked as itself
GUARDED = frozenset(
    {
        *MEMORY_MAKERS,
        ARRAY_CLASS,
        *LOADER_PATHS,
        *LOGGING_FORMATS,
        *(f"enum.{name}" for name in ENUMS),
        *FLAGS,
        *ENVIRONMENT,
        *NOT_MODULE_ATTRIBUTES,
        *PARSERS,
        *NAMEDTUPLES,
    }
)


#: ... of which a class derived from one is checked as it (absl's ``PythonFormatter`` takes
#: logging's styles, numpy's ``MaskedRecords`` a buffer)
GUARDED_CLASSES = frozenset({ARRAY_CLASS, *LOGGING_FORMATS} - {"logging.basicConfig"})


class Refused(Exception):
    """A rule broken at a line: the message without the file."""

    def __init__(self, node: ast.AST, why: str) -> None:
        super().__init__(f"line {getattr(node, 'lineno', 0)}: {why}")


def check_program(path: Path, shown: str, *, names: bool = True) -> str | None:
    """Why the program at ``path`` (``shown`` in the line) may not be graded, or None. With
    ``names``, what its names are is read off the modules it imports first, in a process
    of its own (:mod:`simsync.grading.resolver`): a module, or an object the rules guard,
    reached through another module's attribute is what it is (:func:`check_source`)."""
    try:
        with open(path, "rb") as handle:
            source = handle.read(MOST_BYTES + 1)
    except OSError as error:
        return f"{shown}: cannot be read: {error.strerror}"
    if len(source) > MOST_BYTES:
        return f"{shown}: more than {MOST_BYTES // 2**20} MiB of source, more than is graded"
    why = check_source(source)  # parsed and checked by how it is written, first
    if why is None and names:
        try:
            paths, imports = program_paths(source)
            resolved = resolve(paths, GUARDED, MODULES | YET_TOPS, imports, GUARDED_CLASSES)
        except RuntimeError as error:
            return f"{shown}: the grader could not tell what its names are: {error}"
        why = check_source(source, resolved)
    return None if why is None else f"{shown}: {why}"


def program_paths(source: str | bytes) -> tuple[set[str], set[str]]:
    """Every dotted path of the program's names that starts at a module it imports
    (``numpy.ma.core.np.ndarray`` for ``np.ma.core.np.ndarray``), what it imports among
    them; and the paths its import statements name, apart."""
    tree = ast.parse(source)
    rules = _Rules(tree)
    found: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute):
            path = rules._path(node)
            if path is not None:
                found.add(path)
        elif isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            imported.update(_imported(node, alias) for alias in node.names if alias.name != "*")
    return found | imported, imported


def _folded(node: ast.AST) -> str | None:
    """The string ``node`` makes when it is made of constants alone (a constant, a sum of
    them, an f-string of them); None otherwise.

    >>> _folded(ast.parse("'graph_' + 'options'").body[0].value)
    'graph_options'
    >>> _folded(ast.parse("x + 'options'").body[0].value) is None
    True
    >>> _folded(ast.parse("'_' * 2 + 'array_interface' + 2 * '_'").body[0].value)
    '__array_interface__'
    """
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left), _folded(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):  # '_' * 2
        for text, times in ((node.left, node.right), (node.right, node.left)):
            folded = _folded(text)
            if folded is not None and isinstance(times, ast.Constant):
                count = times.value
                if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= 64:
                    return folded * count
        return None
    if isinstance(node, ast.JoinedStr):
        parts = [_folded(value) for value in node.values]
        return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
    return None


def _format_fields(text: str) -> list[str]:
    """The field names of a format, those of its fields' own formats too; a format Python
    cannot read has one field of its whole text (refused if it holds a dot).

    >>> _format_fields("{step}: {loss:.3f} {0[1]} {x:{width}} {{not}}")
    ['step', 'loss', '0[1]', 'x', 'width']
    >>> _format_fields("{0.__class__}")
    ['0.__class__']
    """
    import string

    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return [text]
    found = []
    for _, field, spec, _ in parsed:
        if field is not None:
            found.append(field)
        if spec:
            found += _format_fields(spec)
    return found


def _splat(node: ast.Call, given: ast.expr) -> None:
    """Refuse a ``**`` argument whose keywords the source does not write out: a mapping it
    builds, or a key it computes (the twenty-fifth attack passed ``ConfigProto`` a key of
    ``"graph-options".replace("-", "_")``, which no constant holds); a key written out is
    checked as a keyword is."""
    if not isinstance(given, ast.Dict):
        raise Refused(node, "passes `**` a mapping it builds: write the keywords out")
    for key in given.keys:
        name = _folded(key) if key is not None else None
        if name is None:
            raise Refused(node, "passes `**` a key it computes: write the keywords out")
        if name in REWRITING:
            raise Refused(node, f"sets `{name}`, {REWRITING_SAID}")
        for value in given.values:  # a sub-message's keys are keywords too
            if isinstance(value, ast.Dict):
                _splat(node, value)


def _splatted(given: ast.expr) -> list[tuple[str, ast.expr]]:
    """The keywords a ``**`` dict written out passes (:func:`_splat` let it through: each
    key folds to a constant), with their values."""
    assert isinstance(given, ast.Dict)
    return [
        (_folded(key) or "", value)
        for key, value in zip(given.keys, given.values, strict=True)
        if key is not None
    ]


def _environment(node: ast.AST, key: ast.AST | None) -> None:
    """Refuse setting the environment's variable ``key`` (a constant the program names) when
    TensorFlow reads it (:data:`ENVIRONMENT_ALLOWED`), or when it is not named by a
    constant."""
    name = _folded(key) if key is not None else None
    if name is None:
        raise Refused(node, "sets a variable of the environment it does not name by a constant")
    if name not in ENVIRONMENT_ALLOWED:
        raise Refused(
            node,
            f"sets `{name}`, a variable of the environment, which could change how TensorFlow "
            "rewrites or computes the graph in your own process: the grader measures your "
            "graph as TensorFlow's defaults run it (a graded program may set only "
            f"{', '.join(sorted(ENVIRONMENT_ALLOWED))})",
        )


def check_source(
    source: str | bytes, resolved: Mapping[str, Mapping[str, str]] | None = None
) -> str | None:
    """Why this source breaks a rule (its line and the rule), or None. ``resolved`` says what
    the program's dotted paths are (:func:`simsync.grading.resolver.resolve`): a module
    reached through another module's attribute is refused, and an object the rules guard
    (:data:`GUARDED`) reached under another path is checked as that object."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return f"line {error.lineno or 0}: not Python ({error.msg})"
    except (ValueError, RecursionError, MemoryError) as error:  # NUL bytes, nesting
        return f"not Python that can be read ({type(error).__name__})"
    parts = sum(1 for _ in itertools.islice(ast.walk(tree), MOST_PARTS + 1))
    if parts > MOST_PARTS:  # a megabyte of `a < a < ...`: 14 s of the grader's own time
        return (
            f"more than {MOST_PARTS:,} parts of Python (names, operators, calls), more than "
            "a training program needs"
        )
    try:
        _Rules(tree, resolved).check(tree)
    except Refused as refused:
        return str(refused)
    except RecursionError:
        return "nested too deeply to be read"
    return None


class _Rules:
    """The rules, with what the whole file binds: imports (name -> module), its own classes,
    and each name's bindings (an object it made, or anything else)."""

    def __init__(
        self, tree: ast.Module, resolved: Mapping[str, Mapping[str, str]] | None = None
    ) -> None:
        #: what each dotted path is, read off the modules (:func:`check_source`)
        self.resolved = resolved or {}
        self.modules: dict[str, str] = {}
        #: ... by their full names (``absl.flags`` for ``from absl import flags``)
        self.full_names: dict[str, str] = {}
        self.classes: set[str] = set()
        #: names bound only to an object the program made (its class's, options)
        self.made: dict[str, bool] = {}
        #: names an assignment binds to such an object somewhere, and the line of a binding
        #: of each name to anything else (what keeps the name from being the object's)
        self.made_somewhere: set[str] = set()
        self.bound_otherwise: dict[str, int] = {}
        #: ... to options it made (``ConfigProto()``), whose parts may be set too
        self.options: dict[str, bool] = {}
        #: the first arguments of methods (their own object); names of calls checked whole
        #: (``getattr(x, "name")``, ``type(x).__name__``)
        self.selves: set[int] = set()
        self.written_out: set[int] = set()
        #: names bound otherwise than by their import or their class statement
        self.rebound: set[str] = set()
        #: what each class of its own may have read off it (constants, static methods)
        self.class_attributes: dict[str, set[str]] = {}
        #: each node's parent (the function a ``self`` is the first argument of)
        self.parents: dict[int, ast.AST] = {}
        methods: list[tuple[ast.ClassDef, ast.FunctionDef | ast.AsyncFunctionDef]] = []
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
                attributes = self.class_attributes.setdefault(node.name, set())
                attributes.update(_class_attributes(node))
                methods += [(node, m) for m in _methods(node)]
            elif isinstance(node, ast.Assign):
                self.rebound.update(n for target in node.targets for n in _names(target))
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    local = alias.asname or alias.name.partition(".")[0]
                    self.modules[local] = _imported(node, alias) if alias.asname else local
                    whole = alias.asname or isinstance(node, ast.ImportFrom)
                    self.full_names[local] = _imported(node, alias) if whole else local
            elif not (isinstance(node, ast.arg) and node.arg in ("self", "cls")):
                self.rebound.update(_bound(node))  # a method's self: see _method_self
        self._aliases(tree)
        # a class's name bound to anything else is no class (an import's too)
        self.classes -= self.rebound | set(self.modules)
        #: Python's classes the program's may derive from, by names it never binds
        self.builtin_bases = set(BUILTIN_BASES) - self.rebound - set(self.modules)
        #: what ``cls`` may have read off it: any class's constants and static methods
        self.readable = set().union(*self.class_attributes.values())
        #: whether a name is bound again in a function (``self = ...``), by function
        self.rebound_in: dict[tuple[int, str], bool] = {}
        named = {id(owner): set(_class_names(owner)) for owner, _ in methods}
        for owner, method in methods:
            self.selves.update(self._self_of(method, named[id(owner)]))
        #: names bound to the flags (``FLAGS = tf.compat.v1.flags.FLAGS``)
        self.flag_names: set[str] = set()
        #: its own classes that derive from an enum's
        self.enum_classes: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                (self._full(base) or "").startswith("enum.") for base in node.bases
            ):
                self.enum_classes.add(node.name)
        assigned = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)]
        while True:  # and a name bound to such a name (``G = FLAGS``), to any depth
            found = {
                n
                for node in assigned
                if self._full(node.value) in FLAGS
                or (isinstance(node.value, ast.Name) and node.value.id in self.flag_names)
                for target in node.targets
                for n in _names(target)
            }
            if found <= self.flag_names:
                break
            self.flag_names |= found
        #: names bound only to strings written out, with each such string (a class or a
        #: function of that name is no string: the thirty-second attack's B24)
        self.literals: dict[str, list[str] | None] = {}
        added: list[ast.AugAssign] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                text = _folded(node.value)
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in _names(target):
                        known = self.literals.get(name, [])
                        if text is None or not isinstance(target, ast.Name) or known is None:
                            self.literals[name] = None
                        else:
                            self.literals[name] = [*known, text]
            elif isinstance(node, ast.AugAssign):
                added.append(node)
            elif isinstance(node, ast.ClassDef):
                self.literals[node.name] = None
            elif not isinstance(node, ast.Name) or isinstance(node.ctx, ast.Del):
                for name in _binds(node):
                    self.literals[name] = None
        for node in added:  # msg += " loss {loss:.3f}": once, or again in a loop
            piece = _folded(node.value) if isinstance(node.op, ast.Add) else None
            for name in _names(node.target):
                known = self.literals.get(name)
                if piece is None or not isinstance(node.target, ast.Name) or known is None:
                    self.literals[name] = None
                else:
                    once = [k + piece for k in known]
                    self.literals[name] = [*known, *once, *(k + piece for k in once)]
        #: names bound only to a parser it made (``argparse.ArgumentParser()``)
        self.parsers: dict[str, bool] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):  # parser = argparse.ArgumentParser()
                made = self._call_to(node.value, PARSERS)
                names = {n for target in node.targets for n in _names(target)}
            elif isinstance(node, ast.Name):
                continue  # counted with the node that binds it (an assignment, a loop, ...)
            else:
                made, names = False, _binds(node)
            for name in names:
                self.parsers[name] = self.parsers.get(name, True) and made
        for node in ast.walk(tree):
            self._bindings(node)

    def _aliases(self, tree: ast.Module) -> None:
        """A name bound once, to a path of an imported module (``m = np.ma.core``, ``layers =
        tf.keras.layers``, ``FLAGS = flags.FLAGS``), is read as that path, as an import's
        name is: kept in a variable, what the rules refuse by its path was out of their
        sight (the thirty-fourth attack's ``m = np.ma.core; m.np.load(...)``, ``o = os;
        o.environ[...]``)."""
        bindings: Counter[str] = Counter()
        candidates: list[tuple[ast.Assign, ast.Name]] = []
        for node in ast.walk(tree):
            bindings.update(_binds(node))
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Name | ast.Attribute)
                # not in a class's body: there it is the class's attribute (Holder.mod)
                and not isinstance(self.parents.get(id(node)), ast.ClassDef)
            ):
                candidates.append((node, node.targets[0]))
        #: the nodes of those assignments (their own binding is no module's name bound again)
        self.alias_nodes: set[int] = set()
        changed = True
        while changed:  # a = np; b = a.ma: each read as its path
            changed = False
            for assign, target in candidates:
                name = target.id
                if id(assign) in self.alias_nodes or bindings[name] != 1 or name in self.modules:
                    continue
                path = self._path(assign.value)
                if path is None:
                    continue
                self.modules[name] = self.full_names[name] = path
                self.rebound.discard(name)
                self.alias_nodes.update((id(assign), id(target)))
                changed = True

    def _module_value(self, node: ast.Name | ast.Attribute) -> None:
        """A module is used by its names: as a value (``[np][0]``, ``f(np)``, ``print(np)``)
        its names are out of the rules' sight. Bound once to a name (:meth:`_aliases`) it
        is that name's, as an import's."""
        if not isinstance(node.ctx, ast.Load):
            return
        path = self._path(node)
        if path is None or "module" not in self.resolved.get(path, {}):
            return
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # np.zeros
        if isinstance(parent, ast.Assign) and id(parent) in self.alias_nodes:
            return  # m = np.ma: m is np.ma's name
        raise Refused(
            node,
            f"uses the module {_quoted(node)} as a value: its names would be out of sight; "
            "use them by their paths, or bind the module to one name once",
        )

    def check(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if id(node) not in self.alias_nodes:
                self._shadowing(node)
            self._node(node)

    def _shadowing(self, node: ast.AST) -> None:
        """A module's name is its import's alone: bound again anywhere (``def helper(os):``),
        what the rules read as the module may be anything, and they could not tell (the
        twenty-ninth attack's F6 set ``os.environ`` past the environment's rules)."""
        if isinstance(node, ast.Import | ast.ImportFrom):
            return
        for name in sorted(_binds(node) & set(self.modules)):
            raise Refused(
                node, f"binds `{name}` again, the name of a module it imports: name it otherwise"
            )

    # what names are bound to

    def _bindings(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):  # mapped in __init__
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                self.made[local] = self.options[local] = False
            return
        if isinstance(node, ast.Assign):
            makes = self._makes(node.value)
            made, options = makes is not None, makes in OPTIONS and makes not in self.classes
            for target in node.targets:
                for name in _names(target):
                    self.made[name] = self.made.get(name, True) and made
                    self.options[name] = self.options.get(name, True) and options
                    if made:
                        self.made_somewhere.add(name)
                    else:
                        self.bound_otherwise.setdefault(name, node.lineno)
            return
        if isinstance(node, ast.arg) and node.arg in ("self", "cls"):
            return  # the first argument of a method, judged where used: _method_self
        for name in _bound(node):
            self.made[name] = self.options[name] = False
            self.bound_otherwise.setdefault(name, getattr(node, "lineno", 0))

    def _makes(self, value: ast.expr) -> str | None:
        """The class of the object of the program's own that ``value`` makes (its own
        class's, or options: ``tf.compat.v1.ConfigProto()`` of a module it imported), if it
        makes one."""
        if self._full(value) in FLAGS:
            return "FLAGS"
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        if isinstance(func, ast.Name) and func.id in self.classes:
            return func.id
        if (  # args = parser.parse_args(): a new namespace (a namespace passed is refused)
            isinstance(func, ast.Attribute)
            and func.attr == "parse_args"
            and (
                (isinstance(func.value, ast.Name) and self.parsers.get(func.value.id, False))
                or self._call_to(func.value, PARSERS)
            )
        ):
            return "Namespace"
        last = (self._resolved(func) or "").rpartition(".")[2]
        return last if last in OPTIONS else None

    def _call_to(self, value: ast.expr, names: frozenset[str]) -> bool:
        """Whether ``value`` calls what one of ``names`` names (by its full name)."""
        return isinstance(value, ast.Call) and self._full(value.func) in names

    def _full(self, node: ast.expr) -> str | None:
        """:meth:`_path`, or the path of the object the rules guard that it is
        (:data:`GUARDED`: ``numpy.ndarray`` for ``np.ma.core.ndarray``) where the program's
        names were read off its modules."""
        path = self._path(node)
        if path is None:
            return None
        return self.resolved.get(path, {}).get("is", path)

    def _path(self, node: ast.expr) -> str | None:
        """:meth:`_resolved`, by the full name of what a ``from`` imported:
        ``absl.flags.FLAGS`` for ``flags.FLAGS`` after ``from absl import flags``."""
        resolved = self._resolved(node)
        if resolved is None:
            return None
        head, dot, rest = resolved.partition(".")
        return self.full_names.get(head, head) + dot + rest

    def _module_alias(self, node: ast.AST, path: str | None) -> None:
        """A module is used under its own path: reached through another module's attribute
        (``np.ma.core.np``, ``logging.handlers.logging``, ``re.enum``), every rule that
        names it by its path is out of sight (the thirty-third attack)."""
        module = self.resolved.get(path or "", {}).get("module")
        if module is None or path is None or _own_path(path, module):
            return
        raise Refused(
            node,
            f"uses `{path}`, which is the module `{module}` held by another module: import "
            "what you use and name it by its own path",
        )

    def _resolved(self, node: ast.expr) -> str | None:
        """The full name of what ``node`` names, when it is a module it imported (or a name
        of one), never bound otherwise, or an attribute of one: ``tensorflow.Graph`` for
        ``from tensorflow import Graph as Model``; else None."""
        if isinstance(node, ast.Attribute):
            base = self._resolved(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Name) and node.id in self.modules:
            return None if node.id in self.rebound else self.modules[node.id]
        return None

    # the rules

    def _node(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            self._import(node)
        elif isinstance(node, ast.Name | ast.Attribute):
            self._module_alias(node, self._path(node))
            self._module_value(node)
            self._loader_use(node)
            self._namer_use(node)
            self._memory_use(node)
            if isinstance(node, ast.Name):
                self._name(node)
            else:
                self._attribute(node)
        elif isinstance(node, ast.Call):
            self._call(node)
        elif isinstance(node, ast.Constant | ast.BinOp | ast.JoinedStr):
            folded = _folded(node)
            said = [name for name in REWRITING if folded is not None and name in folded]
            if folded is not None and any(flag in folded for flag in DEBUGGER_FLAGS):
                raise Refused(
                    node, "names absl's debugger flag, which runs commands from the input"
                )
            if said:
                raise Refused(node, f"names `{said[0]}`, {REWRITING_SAID}")
            if folded is not None and _dunder(folded.strip()) and folded.strip() not in STRINGS:
                raise Refused(node, f"names `{folded.strip()}`, a part of Python's machinery")
        elif isinstance(node, ast.ClassDef):
            self._class(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if _dunder(node.name) and node.name not in METHODS:
                raise Refused(node, f"defines `{node.name}`, which changes how Python works")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                self._target(node, target)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            self._target(node, node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            self._target(node.optional_vars, node.optional_vars)
        elif isinstance(node, ast.MatchClass):  # case C(attr=x): reads x.attr by its name
            for name in node.kwd_attrs:
                if name.startswith("_") or name in NOT_ATTRIBUTES:
                    raise Refused(
                        node,
                        f"matches the attribute `{name}` by name in a class pattern, a part of "
                        f"Python's machinery or not a public API: {PUBLIC}",
                    )
            # what a pattern binds is out of the rules' sight: of a module or of TensorFlow's
            # objects, a loader or os.environ (the twenty-ninth attack's `match np: case
            # object(load=ld)` ran a pickle); its own classes are only called (below)
            if node.kwd_attrs or (node.patterns and _last(node.cls) not in SELF_MATCHED):
                raise Refused(
                    node,
                    f"takes apart {_quoted(node.cls)} in a class pattern (its attributes bound by "
                    "name, out of sight of these rules): read the attributes it needs",
                )

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.ImportFrom) and (node.level or node.module is None):
            raise Refused(node, "imports from its own folder: keep the program in one file")
        for alias in node.names:
            if alias.name == "*":
                raise Refused(node, "imports `*`: import the names it uses")
            if alias.asname and alias.asname.startswith("__"):
                raise Refused(node, f"imports a name as `{alias.asname}`, Python's own")
            module = _imported(node, alias)
            top = module.partition(".")[0]
            self._module_alias(node, module)
            guarded = self.resolved.get(module, {}).get("is")
            if guarded is not None and guarded != module:  # from numpy.ma.core import ndarray
                module = guarded
            if module in ENVIRONMENT:  # from os import putenv
                raise Refused(
                    node,
                    f"imports `{module}`, which reaches the environment otherwise than by its "
                    "items (`import os`, then `os.environ['NAME'] = value`)",
                )
            parent, _, name = module.rpartition(".")
            if module in YET_MODULES or name in YET_NAMES.get(parent, ()):
                continue  # from traceback import format_exc: one of the names it may use
            if top not in MODULES:
                raise Refused(
                    node,
                    f"imports `{module}`, which a graded program may not (its own files, or "
                    f"modules that reach Python's machinery): it may import {_listed(MODULES)}",
                )
            if _internal(module) or (top == "tensorflow" and not _public_tensorflow(module)):
                raise Refused(node, f"imports `{module}`, {NOT_USED}: {PUBLIC}")
            banned = module in NOT_MODULE_ATTRIBUTES  # from sys import path: sys.path
            for part in module.split(".")[1:]:  # from sys import modules: sys.modules
                if banned or part.startswith("_") or part in NOT_ATTRIBUTES:
                    raise Refused(
                        node,
                        f"imports `{module}`, which reaches into a part of Python's machinery "
                        f"or native code: {PUBLIC}",
                    )

    def _passed_on(self, node: ast.AST, given: ast.expr) -> bool:
        """Whether ``given`` (a ``**`` argument of the call ``node``) is the ``**`` parameter
        of the function the call is in, never bound otherwise: what its callers passed,
        each call checked as this one is (``def var(name, **kwargs): get_variable(name,
        **kwargs)``)."""
        if not isinstance(given, ast.Name):
            return False
        owner = self.parents.get(id(node))
        while owner is not None and not isinstance(
            owner, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        ):
            owner = self.parents.get(id(owner))
        if owner is None or owner.args.kwarg is None or owner.args.kwarg.arg != given.id:
            return False
        for inner in ast.walk(owner):  # bound again inside: kwargs = {...}, for kwargs in
            if isinstance(inner, ast.arg):
                continue
            if isinstance(inner, ast.Assign):
                names = {n for target in inner.targets for n in _names(target)}
            else:
                names = set(_bound(inner))
            if given.id in names:
                return False
        return True

    def _environ(self, node: ast.expr) -> str | None:
        """What of :data:`ENVIRONMENT` ``node`` names, by any module's path to it
        (``os.path.os.environ`` and ``shutil.os.putenv`` are ``os.environ`` and
        ``os.putenv``: the twenty-sixth attack reached them so), or None."""
        full = self._full(node)
        if full is None:
            return None
        name = "os." + full.rpartition(".")[2]
        return name if name in ENVIRONMENT else None

    def _environment_use(self, node: ast.Name | ast.Attribute) -> None:
        """Refuse ``os.environ`` (and what else holds or sets the environment's variables:
        :data:`ENVIRONMENT`) reached otherwise than by its items, its read and checked
        methods (:data:`ENVIRONMENT_USES`) or a call of ``os.putenv``, each of which the
        rules check: passed on or kept under another name, it could set any variable."""
        full = self._environ(node)
        if full is None:
            return
        parent = self.parents.get(id(node))
        if full in ("os.environ", "os.environb"):
            if isinstance(parent, ast.Subscript) and parent.value is node:
                return  # os.environ[KEY], read or set (a set is checked: _target)
            if isinstance(parent, ast.Compare) and node in parent.comparators:
                return  # KEY in os.environ
            if (
                isinstance(parent, ast.Call)
                and isinstance(parent.func, ast.Name)
                and parent.func.id == "dict"
                and "dict" not in self.rebound
                and parent.args[:1] == [node]
            ):
                return  # dict(os.environ, ...): a copy
            if isinstance(parent, ast.Attribute) and parent.attr in ENVIRONMENT_USES:
                called = self.parents.get(id(parent))
                if isinstance(called, ast.Call) and called.func is parent:
                    return  # os.environ.get(KEY), .setdefault(KEY, v): checked in _call
        elif full == "os.putenv" and isinstance(parent, ast.Call) and parent.func is node:
            return  # os.putenv(KEY, v): checked in _call
        raise Refused(
            node,
            f"uses `{full}` otherwise than by its items (`os.environ['NAME'] = value`): kept "
            "under another name or passed on, it could set any variable of the environment",
        )

    def _name(self, node: ast.Name) -> None:
        self._environment_use(node)
        if id(node) in self.written_out:  # checked with its call
            return
        parent = self.parents.get(id(node))
        module = self._full(node) or ""
        if module in YET_NAMES and not (
            isinstance(parent, ast.Attribute) and parent.value is node
        ):  # u = timeline; u.logging: its names out of the rules' sight
            raise Refused(
                node,
                f"uses `{node.id}` otherwise than by its names (`{node.id}.name`): of "
                f"`{module}` a program may use only {', '.join(sorted(YET_NAMES[module]))}",
            )
        if node.id == "vars" and self._written_as_text(node):
            return  # print(vars(args)): text of it, no object handed out
        if node.id == "type" and self._as_type(node):
            return  # isinstance(v, type): tested against, never called
        if node.id in self.classes and isinstance(node.ctx, ast.Load):
            parent = self.parents.get(id(node))
            called = isinstance(parent, ast.Call) and parent.func is node
            read = isinstance(parent, ast.Attribute)  # its constants: see _attribute
            based = isinstance(parent, ast.ClassDef) and node in parent.bases
            tested = (
                isinstance(parent, ast.Call)
                and _last(parent.func) in CLASS_TAKERS
                and _last(parent.func) not in self.rebound  # def isinstance(v, k): return k
            )
            if not (called or read or based or tested or self._named_only(node)):
                raise Refused(
                    node,
                    f"uses its class `{node.id}` otherwise than to make an object of it (its "
                    "methods could then be given any object as their own): call it",
                )
        if node.id in NOT_NAMES:
            raise Refused(node, f"uses `{node.id}`, which reaches code or objects by name")
        if _dunder(node.id) and node.id not in DUNDERS and not self._slots(node):
            raise Refused(node, f"uses `{node.id}`, a part of Python's machinery")
        if node.id == "getattr":
            raise Refused(node, "uses `getattr` but to call it with a name written out")

    def _slots(self, node: ast.Name) -> bool:
        """Whether ``node`` is a class's ``__slots__ = ("a", "b")``: set in its class's body,
        to names written out, none of them Python's machinery."""
        assign = self.parents.get(id(node))
        if node.id != "__slots__" or not isinstance(assign, ast.Assign):
            return False
        if assign.targets != [node] or not isinstance(self.parents.get(id(assign)), ast.ClassDef):
            return False
        names = assign.value.elts if isinstance(assign.value, ast.Tuple | ast.List) else []
        return all(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and not _dunder(n.value)
            for n in names
        ) and isinstance(assign.value, ast.Tuple | ast.List)

    def _written_as_text(self, node: ast.Name) -> bool:
        """Whether ``node`` (``vars``, unbound by the program) is called on one value, and
        that call only written out as text: an argument of ``print``, ``str`` or ``repr``
        (:data:`TEXT_TAKERS`), or an f-string's field."""
        if node.id in self.rebound:
            return False
        call = self.parents.get(id(node))
        if not (
            isinstance(call, ast.Call)
            and call.func is node
            and len(call.args) == 1
            and not call.keywords
            and not isinstance(call.args[0], ast.Starred)
        ):
            return False
        taker = self.parents.get(id(call))
        if isinstance(taker, ast.FormattedValue):
            return True
        return (
            isinstance(taker, ast.Call)
            and call in taker.args
            and isinstance(taker.func, ast.Name)
            and taker.func.id in TEXT_TAKERS
            and taker.func.id not in self.rebound
        )

    def _type_read(self, node: ast.Call) -> bool:
        """Whether ``type(x)`` is compared (``type(x) == list``, ``type(x) is int``), or its
        ``__name__`` read: what it is not is handed out or called."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Compare | ast.FormattedValue):  # f"{type(x)}" too
            return True
        if (  # print(type(x)), isinstance(y, type(x))
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in ("print", "str", "repr", "isinstance", "issubclass")
            and parent.func.id not in self.rebound
        ):
            return True
        return isinstance(parent, ast.Attribute) and parent.attr == "__name__"

    def _climbed(
        self, node: ast.AST, through: tuple[type[ast.AST], ...]
    ) -> tuple[ast.AST, ast.AST | None]:
        """``node``'s outermost enclosing node of the kinds ``through`` (itself when none),
        and that one's parent: where a name inside ``Optional[A]`` or ``(A, B)`` is used."""
        child, parent = node, self.parents.get(id(node))
        while isinstance(parent, through):
            child, parent = parent, self.parents.get(id(parent))
        return child, parent

    def _named_only(self, node: ast.Name) -> bool:
        """Whether a class of the program's own is only named where Python takes a class and
        hands none of its methods another object: a type hint (``cfg: Config``), what an
        ``except`` catches or a ``raise`` raises (an exception class), and an enum class's
        members read (``for m in Mode``, ``Mode['TRAIN']``, ``len(Mode)``)."""
        child, parent = self._climbed(node, (ast.Tuple, ast.Subscript, ast.BinOp, ast.Attribute))
        if _type_hint(child, parent):
            return True
        if isinstance(parent, ast.ExceptHandler) and parent.type is child:
            return True
        if isinstance(parent, ast.Raise) and parent.exc is child:
            return True
        if node.id not in self.enum_classes:
            return False
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.For | ast.AsyncFor | ast.comprehension):
            return parent.iter is node
        if isinstance(parent, ast.Subscript):
            return parent.value is node
        return (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in ("len", "list", "tuple", "sorted", "set")
            and parent.args == [node]
        )

    def _attribute(self, node: ast.Attribute) -> None:
        self._environment_use(node)
        name, base = node.attr, node.value
        parent = self.parents.get(id(node))
        if (
            name in FORMATTERS
            and self._resolved(base) is None
            and not (isinstance(parent, ast.Call) and parent.func is node)
            and not self._plain_format(base)  # fmt = "{:>8}".format: its fields in sight
        ):  # "{0.x}".format taken as a value: its format is out of the call's sight
            raise Refused(node, f"uses {_quoted(node)} otherwise than by calling it there")
        if name in FORMATTERS and isinstance(base, ast.Name) and base.id == "str":
            raise Refused(node, f"uses {_quoted(node)}: call the format string's own method")
        if _call_of(base, "type", 1) and name != "__name__":  # type(x).f(anything)
            raise Refused(node, f"uses {_quoted(node)}, an attribute of an object's class")
        inherited = name in METHODS and _super(base)  # super().__init__()
        if name in DUNDERS and isinstance(node.ctx, ast.Load):  # tf.__version__
            return
        parent = self.parents.get(id(node))
        if name == "__class__" and isinstance(parent, ast.Attribute) and parent.attr == "__name__":
            return  # self.__class__.__name__: a string
        if _dunder(name) and not inherited:
            raise Refused(node, f"uses {_quoted(node)}, a part of Python's machinery")
        own = isinstance(base, ast.Name) and base.id in ("self", "cls") and self._own_name(base)
        own = own or inherited
        if (
            isinstance(base, ast.Name)
            and (base.id in self.classes or base.id == "cls")
            and name not in self.class_attributes.get(base.id, self.readable)
        ):
            raise Refused(
                node,
                f"uses {_quoted(node)}, a method read off its class: call it on an object of the "
                f"class (`{base.id}(...).{name}(...)`), which is its own",
            )
        public = name in TUPLE_NAMES and isinstance(node.ctx, ast.Load)  # p._replace(x=1)
        if name.startswith("_") and not (own or public):
            raise Refused(
                node,
                f"{_quoted(node)} reaches into a part of TensorFlow or Python that is not its "
                f"public API (a name that starts with '_'): {PUBLIC}",
            )
        path = self._module_path(node) or ""
        full = self._full(node) or ""
        for module, names in YET_NAMES.items():
            if full.startswith(module + ".") and full[len(module) + 1 :].split(".")[0] not in names:
                raise Refused(
                    node,
                    f"uses {_quoted(node)}: of `{module}` a program may use only "
                    f"{', '.join(sorted(names))}; the rest of it reaches TensorFlow's internals "
                    "or Python's machinery",
                )
        if _internal(path):  # keras.src.utils.func_load, logging.config as an attribute
            raise Refused(
                node,
                f"uses {_quoted(node)}, {NOT_USED}: {PUBLIC}",
            )
        if path and name in NOT_NAMES - {"compile"}:  # not tensor.eval(), re.compile()
            raise Refused(node, f"uses {_quoted(node)}, which reaches code or objects by name")
        if name in REWRITING:
            raise Refused(node, f"uses {_quoted(node)}, {REWRITING_SAID}")
        if (
            name in NOT_ATTRIBUTES
            or path in NOT_MODULE_ATTRIBUTES
            or path.endswith(tuple("." + p for p in NOT_MODULE_ATTRIBUTES))
        ):
            raise Refused(
                node, f"uses {_quoted(node)}, which reaches Python's machinery or native code"
            )

    def _format(self, node: ast.Call) -> None:
        """A format's fields read attributes and items off what they are given: a format
        (a string's ``format``, ``format_map``, logging's ``style="{"``) is written out,
        or a name bound only to strings written out, and its fields read no attribute
        (``"{0.shape}"``: pass ``x.shape`` itself). A module's own ``format`` is its own
        (``tf.strings.format``)."""
        func = node.func
        formats: list[ast.expr] = []
        if isinstance(func, ast.Attribute) and func.attr in FORMATTERS:
            if self._resolved(func.value) is None:
                formats.append(func.value)
        elif isinstance(func, ast.Name) and func.id in FORMATTERS and func.id in self.rebound:
            formats.append(func)
        named = [(k.arg, k.value) for k in node.keywords if k.arg is not None]
        for k in node.keywords:
            if k.arg is None and isinstance(k.value, ast.Dict):
                named += _splatted(k.value)  # **{"style": "{"}: its keys written out
        styles = [value for arg, value in named if arg == "style"]
        if self._full(func) in LOGGING_FORMATS:  # logging.Formatter(fmt, datefmt, style)
            if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None and not isinstance(k.value, ast.Dict) for k in node.keywords
            ):
                raise Refused(node, "passes a logging format's arguments out of sight (* or **)")
            styles += node.args[2:3]
        if any(not (isinstance(v, ast.Constant) and v.value in PLAIN_STYLES) for v in styles):
            formats += [  # the brace style, or a style not written out: taken as braces
                *node.args[:1],
                *(value for arg, value in named if arg in ("fmt", "format")),
            ]
        for given in formats:
            if isinstance(given, ast.Constant) and given.value is None:
                continue  # logging.Formatter(None, ...): its default format
            texts = self._written_out(given)
            if texts is None:
                raise Refused(
                    node,
                    "fills a format it does not write out: a format's field reads any "
                    "attribute of what it is given (`{0.x}`), so write the format's string "
                    "in the call, or bind a name to it alone",
                )
            for text in texts:
                for field in _format_fields(text):
                    if "." in field:
                        raise Refused(
                            node,
                            f"its format's field `{{{field}}}` reads an attribute: pass what it "
                            "reads itself (`{}`.format(x.shape), not `{0.shape}`.format(x))",
                        )

    @staticmethod
    def _plain_format(node: ast.expr) -> bool:
        """Whether ``node`` is a format string written out whose fields read no attribute
        (``"{:>8}"``, not ``"{0.x}"``)."""
        text = _folded(node)
        return text is not None and all("." not in field for field in _format_fields(text))

    def _written_out(self, node: ast.expr) -> list[str] | None:
        """The strings ``node`` can be, when it is written out: a string of constants, or a
        name bound only to such strings; else None."""
        text = _folded(node)
        if text is not None:
            return [text]
        if isinstance(node, ast.Name):
            return self.literals.get(node.id)
        if isinstance(node, ast.IfExp):  # '{:.6f}' if precise else '{:.2f}'
            body, orelse = self._written_out(node.body), self._written_out(node.orelse)
            return None if body is None or orelse is None else [*body, *orelse]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):  # '{:>10}' * n
            for side in (node.left, node.right):
                texts = self._written_out(side)
                if texts is not None:  # its fields, and those where two copies meet
                    return [*texts, *(t + t for t in texts)]
        return None

    def _call(self, node: ast.Call) -> None:
        if self._environ(node.func) == "os.putenv" or (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in ("setdefault", "update", "__setitem__")
            and self._environ(node.func.value) == "os.environ"
        ):
            for given in (*node.args[:1], *(k.value for k in node.keywords if k.arg is None)):
                keys = given.keys if isinstance(given, ast.Dict) else [given]
                for key in keys:
                    _environment(node, key)
            for keyword in node.keywords:
                if keyword.arg is not None:
                    _environment(node, ast.Constant(keyword.arg))
        self._format(node)
        formatted = (  # "{step}: {loss}".format(**values): a string's own fields
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)
        )
        named = [(k.arg, k.value) for k in node.keywords if k.arg is not None]
        for keyword in node.keywords:
            if keyword.arg is None and not formatted and not self._passed_on(node, keyword.value):
                _splat(node, keyword.value)
                # its keys are keywords, checked as those written out (the twenty-seventh
                # attack passed np.load **{"allow_pickle": True}, and a pickle ran)
                named += _splatted(keyword.value)
        for arg, value in named:
            if _dunder(arg) and arg not in DUNDERS:  # Namespace(__array_interface__=...)
                raise Refused(node, f"sets `{arg}`, a part of Python's machinery")
            if arg in REWRITING:
                raise Refused(node, f"sets `{arg}`, {REWRITING_SAID}")
            if arg in NOT_KEYWORDS and not _constant(value, NOT_KEYWORDS[arg]):
                raise Refused(node, f"sets `{arg}`, which runs code kept in data")
            if arg in NAMESPACES:
                raise Refused(node, f"passes `{arg}`, whose attributes are set by name")
        if _last(node.func) in PARSES and (
            len(node.args) > 1 or any(isinstance(a, ast.Starred) for a in node.args)
        ):  # a namespace by place, or maybe (the thirty-second attack: json as the namespace)
            raise Refused(node, "passes a namespace, whose attributes are set by name")
        if _call_of(node, "type", 1) and not self._type_read(node):
            raise Refused(
                node,
                "uses `type(x)` otherwise than to compare it or read its `__name__`: an "
                "object's class (`type` itself, of a class) could be called or handed out",
            )
        if (
            self._full(node.func) == "dataclasses.dataclass"
            and node.args
            and not isinstance(self.parents.get(id(node)), ast.ClassDef)
        ):  # dataclass(json.JSONEncoder) rewrites another module's class
            raise Refused(node, "calls `dataclass` on a class: decorate a class of its own")
        self._attribute_names(node, named)
        if _call_of(node, "type", 1):  # type(x) == list, type(error).__name__
            self.written_out.add(id(node.func))
        loader = self._loader(node.func)  # np.load, not variable.load(v, sess)
        if loader is not None:
            unsafe = f"({', '.join(sorted(NOT_KEYWORDS))} run code kept in data)"
            if any(k.arg is None and not isinstance(k.value, ast.Dict) for k in node.keywords):
                # a function's own **kwargs passed on: its callers may be out of sight (the
                # twenty-eighth attack's Thread(target=helper, kwargs={"allow_pickle": True}))
                raise Refused(
                    node, f"passes `{loader}` keywords it does not write out: name each {unsafe}"
                )
            if len(node.args) > 1 or any(isinstance(a, ast.Starred) for a in node.args):
                raise Refused(
                    node, f"passes `{loader}` more than its file by place: name the others {unsafe}"
                )
        if isinstance(node.func, ast.Name) and node.func.id == "getattr":
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                raise Refused(node, "calls `getattr` with a name it computes: write the name out")
            attribute = ast.Attribute(node.args[0], name.value, ast.Load())
            self._loader_use(ast.copy_location(attribute, node))  # a value, never a call
            self._memory_use(attribute)
            self._attribute(attribute)
            self.written_out.add(id(node.func))

    def _attribute_names(self, node: ast.Call, named: list[tuple[str, ast.expr]]) -> None:
        """A call that makes attributes (or an enum's class attributes) of names it is given
        has them written out, none of Python's machinery: an argparse option and its
        ``dest``, an absl flag, an enum made by a call. A name computed at run time could be
        ``__array_interface__``. ``named``: its keywords, those of a ``**`` dict written out
        among them; a ``**`` of anything else (a function's own ``**kwargs`` passed on, whose
        callers give any ``dest``) is refused on such a call."""
        last = _last(node.func) or ""

        def keyword(*keywords: str) -> list[ast.expr]:
            return [value for arg, value in named if arg in keywords]

        extra = keyword("extra")  # a log record's
        if extra and not (isinstance(extra[0], ast.Dict) and None not in extra[0].keys):
            raise Refused(node, "passes `extra` a mapping it builds: write its keys out")
        namer = last in NAMERS or last.startswith("DEFINE") or last in LOG_CALLS
        if namer and any(
            k.arg is None and not isinstance(k.value, ast.Dict) for k in node.keywords
        ):
            raise Refused(
                node,
                f"passes {_quoted(node.func)} keywords it does not write out (`**`): the "
                "names of the attributes it makes would be out of sight",
            )
        if last == "add_argument":
            names = [*node.args, *keyword("dest")]
        elif last == "add_subparsers":
            names = keyword("dest")
        elif extra:
            names = list(extra[0].keys)  # type: ignore[attr-defined]
        elif last.startswith("DEFINE") and last not in ("DEFINE", "DEFINE_flag"):
            names = [*node.args[:1], *keyword("name")]
            if last == "DEFINE_alias":
                names += [*node.args[1:2], *keyword("original_name")]
        elif last in ("DEFINE", "DEFINE_flag"):
            raise Refused(node, f"calls {_quoted(node.func)}, whose flag's name is out of sight")
        elif any(k.arg == "prefix_chars" for k in node.keywords):
            raise Refused(
                node, "sets `prefix_chars`, which gives its options' attributes other names"
            )
        elif (
            (self._full(node.func) or "").startswith("enum.")
            or (isinstance(node.func, ast.Name) and node.func.id in self.enum_classes)
        ) and (len(node.args) > 1 or any(k.arg == "names" for k in node.keywords)):
            raise Refused(node, "makes an enum of names given as data: write its class out")
        else:
            return
        for given in names:
            name = _folded(given)
            attribute = None if name is None else name.lstrip("-").replace("-", "_")
            if attribute is None or (_dunder(attribute) and attribute not in STRINGS):
                raise Refused(
                    node,
                    f"gives {_quoted(node.func)} a name it computes, or one of Python's "
                    "machinery: write the name out",
                )

    def _loader(self, node: ast.expr) -> str | None:
        """The name of the loader ``node`` names (:data:`LOADERS`), or None."""
        last = _last(node) if isinstance(node, ast.Name | ast.Attribute) else None
        if last in LOADERS or LOADER_PATHS & {self._module_path(node), self._full(node)}:
            return last
        return None

    def _loader_use(self, node: ast.Name | ast.Attribute) -> None:
        """A loader is only called, by its name: passed as a value, its arguments are out
        of sight (``partial(np.load, f, None, True)``, ``Thread(target=np.load, ...)``)."""
        name = self._loader(node)
        if name is None:
            return
        parent = self.parents.get(id(node))
        if not (isinstance(parent, ast.Call) and parent.func is node):
            raise Refused(
                node,
                f"uses `{name}` otherwise than by calling it: it loads data that could hold "
                "code, so call it by its name, its file by place and the rest by keyword",
            )

    def _memory_use(self, node: ast.Name | ast.Attribute) -> None:
        """numpy's makers of an array over memory it is handed (:data:`MEMORY_MAKERS`) are
        refused, and its array class used but to test a value or in a type hint: called (its
        ``buffer``), or passed on, it makes one too."""
        full = self._full(node) or ""
        if not full.startswith("numpy"):
            return
        if any(full == maker or full.startswith(maker + ".") for maker in MEMORY_MAKERS):
            raise Refused(
                node,
                f"uses {_quoted(node)}, which makes an array over memory it is handed (a "
                "buffer, a file mapped, bytes): make arrays of values (np.array, np.zeros, "
                "np.frombuffer)",
            )
        if full == ARRAY_CLASS and not self._as_type(node):
            raise Refused(
                node,
                f"uses {_quoted(node)} otherwise than to test a value (isinstance) or in a "
                "type hint: called, it makes an array over memory it is handed; make arrays "
                "of values (np.array, np.zeros, np.frombuffer)",
            )

    def _as_type(self, node: ast.expr) -> bool:
        """Whether ``node`` is named only as a type: tested (``isinstance(x, (A, B))``), or in
        a type hint (an argument's, an assignment's, a function's return; ``A | None``,
        ``Optional[A]``)."""
        child, parent = self._climbed(node, (ast.Tuple, ast.Subscript, ast.BinOp))
        if _type_hint(child, parent):
            return True
        return (
            isinstance(parent, ast.Call)
            and parent.func is not child
            and _last(parent.func) in CLASS_TAKERS - {"super"}
            and _last(parent.func) not in self.rebound
        )

    def _namer_use(self, node: ast.Name | ast.Attribute) -> None:
        """What makes attributes of names (:data:`NAMERS`, a ``DEFINE...``) is only called,
        by its name; an enum's class is only a class's base; the flags (``absl.flags.FLAGS``,
        or a name bound to them) are only read or set by attribute, called on the command
        line, or bound to a name: as a value they could be given a flag of any name
        (``fv[name] = fv['lr']``)."""
        full = self._full(node) or ""
        last = full.rpartition(".")[2] or _last(node) or ""  # an import's own name
        parent = self.parents.get(id(node))
        namer = last in NAMERS or last.startswith("DEFINE")
        if isinstance(node, ast.Name) and node.id not in self.modules:
            namer = False  # a name of its own (``DEFINED = True``), no import of absl's
        if namer and not (isinstance(parent, ast.Call) and parent.func is node):
            raise Refused(
                node,
                f"uses {_quoted(node)} otherwise than by calling it: it makes attributes "
                "of the names it is given, so call it by its name, the names written out",
            )
        if full in LOGGING_FORMATS and not (isinstance(parent, ast.Call) and parent.func is node):
            raise Refused(  # F = logging.Formatter; F(fmt, None, "{"): its style out of sight
                node,
                f"uses {_quoted(node)} otherwise than by calling it: its format's style "
                "would be out of sight",
            )
        enum = full.startswith("enum.") and full.rpartition(".")[2] in ENUMS
        if enum and not (isinstance(parent, ast.ClassDef) and node in parent.bases):
            raise Refused(
                node,
                f"uses {_quoted(node)} otherwise than as a class's base: called, it makes "
                "a class of names given as data",
            )
        if full in FLAGS or (isinstance(node, ast.Name) and node.id in self.flag_names):
            read = isinstance(parent, ast.Attribute) and parent.value is node
            called = isinstance(parent, ast.Call) and parent.func is node
            bound = isinstance(parent, ast.Assign) and parent.value is node
            if not (read or called or bound) and isinstance(getattr(node, "ctx", None), ast.Load):
                raise Refused(
                    node,
                    f"uses the flags {_quoted(node)} otherwise than by their attributes: "
                    "given as a value, they could be given a flag of any name",
                )

    def _class(self, node: ast.ClassDef) -> None:
        if node.keywords:
            raise Refused(node, f"class `{node.name}` sets a metaclass or class keywords")
        for decorator in node.decorator_list:
            made = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self._full(made) != "dataclasses.dataclass":
                raise Refused(node, f"class `{node.name}` has a decorator: it could be anything")
        for base in node.bases:
            if isinstance(base, ast.Call) and self._resolved(base.func) in NAMEDTUPLES:
                continue  # a tuple class of its own
            if isinstance(base, ast.Name) and base.id in self.classes | self.builtin_bases:
                continue
            if (self._resolved(base) or "").rpartition(".")[2] not in BASES:
                raise Refused(
                    node,
                    f"class `{node.name}` derives from {_quoted(base)}: a graded program's "
                    f"classes may derive from {_listed(BUILTIN_BASES | BASES)} (imported as "
                    "such) or its own",
                )

    def _target(self, node: ast.AST, target: ast.expr) -> None:
        """An assignment's target: an attribute only of the program's own objects, an item
        of none of a module's (but ``os.environ``)."""
        for part in _parts(target):
            if isinstance(part, ast.Attribute):
                if not self._settable(part.value):
                    root = _root(part.value)
                    name = root.id if isinstance(root, ast.Name) else ""
                    made = name in self.made_somewhere
                    other = self.bound_otherwise.get(name, 0) if made else 0
                    hint = (  # args = parser.parse_args() beside a def log(*args)
                        f": `{name}` is bound to something else too (line {other}), so the "
                        "rules cannot tell it is the object it made; name one of them otherwise"
                        if other
                        else ""
                    )
                    raise Refused(
                        node,
                        f"sets {_quoted(part)}: a graded program sets attributes of its own "
                        f"objects only (self, its classes' objects, options it made){hint}",
                    )
            elif isinstance(part, ast.Subscript):
                root = _root(part)
                module = isinstance(root, ast.Name) and root.id in self.modules
                if module and self._module_path(part.value) != "os.environ":
                    raise Refused(node, f"changes {_quoted(part)}, a part of a module")
                if module:  # os.environ[KEY] = ...: TensorFlow's own variables are not
                    _environment(node, part.slice)

    def _settable(self, node: ast.expr) -> bool:
        """Whether the program may set attributes of ``node``: its own object (``self``,
        ``hook``), or a part of options it made (``config.gpu_options``), whose parts are
        options too (an object of its own could hold anything)."""
        if isinstance(node, ast.Name):
            return self._own_name(node)
        if self._full(node) in FLAGS:  # flags.FLAGS.learning_rate = 0.1
            return True
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and self.options.get(node.id, False)

    def _own_name(self, node: ast.Name) -> bool:
        """Whether the name ``node`` is the program's own object: the ``self`` of the method
        it is used in, or a name only ever bound to an object it made."""
        if node.id in ("self", "cls"):
            return self._method_self(node)
        return self._own(node.id)

    def _method_self(self, node: ast.Name) -> bool:
        """Whether ``node`` (``self`` or ``cls``) is the first argument of the method it is
        used in, or of the method around the function it is used in (a closure), never
        bound again there: not a lambda's, a static or aliased method's, nor that of one
        whose decorator could give it anything."""
        scope = self.parents.get(id(node))
        while scope is not None:
            if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                arguments = [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs]
                if any(a.arg == node.id for a in arguments):  # the function it is bound in
                    first = arguments[0]
                    if first.arg != node.id or id(first) not in self.selves:
                        return False
                    return not self._bound_again(scope, node.id, first)
            scope = self.parents.get(id(scope))
        return False

    def _bound_again(self, function: ast.AST, name: str, own: ast.arg) -> bool:
        """Whether ``function`` (or one inside it) binds ``name`` anew, however (``=``, an
        argument of a function inside, ``import ... as``, ``except ... as``, ``global``, a
        pattern's capture ``case self:``), but by its own argument ``own`` (once per
        function)."""
        key = (id(function), name)
        if key not in self.rebound_in:
            self.rebound_in[key] = any(
                n is not own and name in _binds(n) for n in ast.walk(function)
            )
        return self.rebound_in[key]

    def _self_of(
        self, method: ast.FunctionDef | ast.AsyncFunctionDef, named: set[str]
    ) -> Iterator[int]:
        """The first argument of ``method``, if it is its own object: a method its class
        body does not read by name (``named``: ``staticmethod(put)`` could be given
        anything as its ``self``), decorated only by decorators that pass its own object
        on (:data:`DECORATORS`, a property's setter)."""
        arguments = [*method.args.posonlyargs, *method.args.args]
        if not arguments or arguments[0].arg not in ("self", "cls") or method.name in named:
            return
        for decorator in method.decorator_list:
            made = decorator.func if isinstance(decorator, ast.Call) else decorator
            if not self._passes_self(made):
                return
        yield id(arguments[0])

    def _passes_self(self, decorator: ast.expr) -> bool:
        """Whether a method's ``decorator`` gives it its own object as its first argument."""
        if isinstance(decorator, ast.Name) and decorator.id in ("property", "classmethod"):
            return decorator.id not in self.rebound | set(self.modules)
        accessor = isinstance(decorator, ast.Attribute) and isinstance(decorator.value, ast.Name)
        if accessor and decorator.attr in ("setter", "getter", "deleter"):  # type: ignore[attr-defined]
            return True  # a property's
        return self._full(decorator) in DECORATORS

    def _own(self, name: str) -> bool:
        """Whether ``name`` is only ever bound to the program's own object."""
        return name in self.classes or self.made.get(name, False)

    def _module_path(self, node: ast.expr) -> str | None:
        """``a.b.c`` of an attribute chain whose root is an imported module, with its name."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.modules:
            return None
        return ".".join([self.modules[node.id], *reversed(parts)])


#: modules a program reaches under a path other than their names, the public API's own:
#: TensorFlow's API modules (``tf.nn`` is ``tensorflow._api.v2.nn``), Keras' behind
#: ``tf.keras`` (``keras._tf_keras.keras``, ``keras.optimizers``; not its internals), and
#: ``os.path``
API_MODULES = (("tensorflow.", "tensorflow._api.v2."), ("tensorflow.", "keras."))
ALIASED_MODULES = frozenset({("os.path", "posixpath")})


def _type_hint(child: ast.AST, parent: ast.AST | None) -> bool:
    """Whether ``child`` is the type hint of ``parent``: an argument's, an annotated
    assignment's, or a function's return."""
    if isinstance(parent, ast.arg | ast.AnnAssign) and parent.annotation is child:
        return True
    return isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef) and parent.returns is child


def _own_path(path: str, module: str) -> bool:
    """Whether the module named ``module`` is reached at ``path`` by its own path (or the
    public API's, :data:`API_MODULES`), not through another module's attribute.

    >>> _own_path("numpy.linalg", "numpy.linalg")
    True
    >>> _own_path("tensorflow.nn", "tensorflow._api.v2.nn")
    True
    >>> _own_path("numpy.ma.core.np", "numpy"), _own_path("re.enum", "enum")
    (False, False)
    >>> _own_path("tensorflow.compat.v1.keras.layers", "keras._tf_keras.keras.layers")
    True
    """
    if path == module or (path, module) in ALIASED_MODULES:
        return True
    return not _internal(module) and any(
        path.startswith(top) and module.startswith(api) for top, api in API_MODULES
    )


def _internal(path: str) -> bool:
    """Whether the module path ``path`` reaches into a module a program may not import.

    >>> _internal("keras.src.utils.python_utils"), _internal("tensorflow.keras.src")
    (True, True)
    >>> _internal("logging.config.dictConfig"), _internal("keras.layers.Dense"), _internal("")
    (True, False, False)
    """
    parts = path.split(".")
    if parts[0] in ("keras", "tensorflow") and "src" in parts:
        return True
    return any(path == m or path.startswith(m + ".") for m in NOT_MODULES)


def _public_tensorflow(module: str) -> bool:
    """Whether ``module`` (or a name imported from it) is of TensorFlow's public API."""
    parts = module.split(".")
    if len(parts) <= 2:  # tensorflow, from tensorflow import keras
        return True
    return any(module == m or module.startswith(m + ".") for m in TENSORFLOW)


def _methods(node: ast.ClassDef) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            yield item


def _class_names(node: ast.ClassDef) -> Iterator[str]:
    """Names the class's body reads in its own scope (``put2 = staticmethod(put)``, a
    method's decorators and defaults): a method read so could be called with anything as
    its ``self``."""
    todo: list[ast.AST] = list(node.body)
    while todo:
        item = todo.pop()
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            todo += [*item.decorator_list, *item.args.defaults]
            todo += [d for d in item.args.kw_defaults if d is not None]
            continue
        if isinstance(item, ast.Lambda | ast.ClassDef):
            continue
        if isinstance(item, ast.Attribute) and item.attr in ("setter", "getter", "deleter"):
            continue  # @size.setter: the property, not the function, is read
        if isinstance(item, ast.Name):
            yield item.id
        todo += list(ast.iter_child_nodes(item))


def _class_attributes(node: ast.ClassDef) -> Iterator[str]:
    """What a class's own code may read off the class itself: its constants (an enum's
    members) and its static and class methods, not a method whose ``self`` it would give."""
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(_last(d) in ("staticmethod", "classmethod") for d in item.decorator_list):
                yield item.name
        elif isinstance(item, ast.Assign):
            for target in item.targets:
                yield from _names(target)
        elif isinstance(item, ast.AnnAssign):
            yield from _names(item.target)


def _imported(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    if isinstance(node, ast.ImportFrom):
        return f"{node.module}.{alias.name}"
    return alias.name


def _bound(node: ast.AST) -> Iterator[str]:
    """Names ``node`` binds other than by ``=`` (arguments, loops, ``with``, ``:=``, ...)."""
    if isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(
        node, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor | ast.comprehension
    ):
        yield from _names(node.target)
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        yield from _names(node.optional_vars)
    elif isinstance(node, ast.NamedExpr):
        yield from _names(node.target)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ExceptHandler):
        yield from [node.name] if node.name else []
    elif isinstance(node, ast.Global | ast.Nonlocal):
        yield from node.names
    elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest


def _binds(node: ast.AST) -> set[str]:
    """Every name ``node`` binds, by any means: ``=`` and ``del`` too, and imports."""
    if isinstance(node, ast.Name):
        return set() if isinstance(node.ctx, ast.Load) else {node.id}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {alias.asname or alias.name.partition(".")[0] for alias in node.names}
    return set(_bound(node))


def _names(target: ast.expr) -> Iterator[str]:
    for part in _parts(target):
        if isinstance(part, ast.Name):
            yield part.id


def _parts(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _parts(element)
    elif isinstance(target, ast.Starred):
        yield from _parts(target.value)
    else:
        yield target


def _root(node: ast.expr) -> ast.expr:
    """The name an attribute, item or call chain starts from."""
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript | ast.Starred):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return node


def _last(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _super(node: ast.expr) -> bool:
    """``super()``, whose methods a class's own may call (``super().__init__()``)."""
    if _call_of(node, "super", 0):
        return True
    if not _call_of(node, "super", 2):  # super(Net, self)
        return False
    first, second = node.args  # type: ignore[attr-defined]
    return isinstance(first, ast.Name) and isinstance(second, ast.Name) and second.id == "self"


def _call_of(node: ast.expr, name: str, arguments: int) -> bool:
    """Whether ``node`` calls the name ``name`` with that many arguments, no keywords."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
        and len(node.args) == arguments
        and not node.keywords
    )


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _constant(node: ast.expr, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _quoted(node: ast.expr) -> str:
    """``node`` as a refusal shows it, in backquotes (written out only then: every
    attribute of a program is checked)."""
    return f"`{_shown(node)}`"


def _shown(node: ast.expr) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _listed(names: frozenset[str]) -> str:
    return ", ".join(sorted(names))
