package torch

import (
	"strings"
)

//go:generate go test -run ^TestAllowFixtures$ -update .
//go:generate sh -c "/usr/bin/python3 internal/pycompat/gen.py allowcompat.go && gofmt -w allowcompat.go"

// The rules for WithAllow (scan --allow, convert --allow). Allowing a
// global says "what pickle builds from it is data": it exists for inert
// data classes (argparse.Namespace, numpy values, a project's config
// class). It must never turn a callable that imports, loads, compiles,
// evaluates or runs code into "clean", so a name is refused, as a usage
// error naming it and why, when
//
//   - it, or the name Python 3 imports for it (pickle's fix_imports maps
//     protocol 0-2 names: commands.Popen is subprocess.Popen), is on
//     deniedGlobals or in a module of deniedModules (each with its reason);
//   - it names a module (posixpath.os is the os module): a module object
//     handed to a pickle can be BUILT into (its globals overwritten);
//   - it is not a class by Python's naming convention (CapWords, after
//     leading underscores): functions are what loaders and runners are
//     (torch.load, pydoc.locate, yaml.load, dill.loads, copyreg's
//     _reconstructor, cpp_extension.load_inline...), and lower-case names
//     are functions or modules; only the vetted functions and lower-case
//     classes of vettedAllow, each checked to build data only, pass.
//
// A name that passes is still only as inert as its class: its constructor
// and its own __setstate__ run in torch.load, and the caller vouches for
// them. What a pickle can add to it is checked on every use (records.go:
// an allowed object whose arguments or BUILD state set a dunder name is
// dangerous), and a name whose function loads nested pickled data
// (torch.storage._load_from_bytes) is refused outright: no verdict about
// the outer file could say what torch would run for the inner one.

// vettedAllow are lower-case names that may be allowed: each builds only
// data from data (checked against their sources).
var vettedAllow = map[string]bool{
	// numpy scalars and arrays, numpy 1.x and 2.x spellings: scalar(dtype,
	// bytes) and _reconstruct(ndarray, shape, typecode) build a value from
	// bytes; dtype and ndarray are classes whose __setstate__ takes data.
	"numpy.core.multiarray.scalar": true, "numpy.core.multiarray._reconstruct": true,
	"numpy._core.multiarray.scalar": true, "numpy._core.multiarray._reconstruct": true,
	"numpy.dtype": true, "numpy.ndarray": true,
	"numpy.bool_": true, "numpy.int8": true, "numpy.int16": true, "numpy.int32": true, "numpy.int64": true,
	"numpy.uint8": true, "numpy.uint16": true, "numpy.uint32": true, "numpy.uint64": true,
	"numpy.float16": true, "numpy.float32": true, "numpy.float64": true, "numpy.longdouble": true,
	"numpy.complex64": true, "numpy.complex128": true, "numpy.str_": true, "numpy.bytes_": true,
	// builtin data types (as values or called with data)
	"builtins.int": true, "builtins.float": true, "builtins.str": true, "builtins.bytes": true,
	"builtins.bool": true, "builtins.list": true, "builtins.dict": true, "builtins.tuple": true,
	"builtins.slice": true, "builtins.range": true,
	// data classes of the standard library with lower-case names
	"collections.defaultdict": true,
	"datetime.date":           true, "datetime.datetime": true, "datetime.time": true, "datetime.timedelta": true,
	"datetime.timezone": true,
	// SimpleNamespace(**kw) and its BUILD set attributes only (types itself is refused)
	"types.SimpleNamespace": true,
}

// valueOnlyAllow are vetted names that may appear as values (a dtype=int
// hyper-parameter) but not be called: their pickles never call them
// (ints, lists and arrays have their own opcodes or _reconstruct), and a
// call with arguments the pickle chose allocates what it is told
// (bytes(10**12), list(range(10**12)), ndarray((10**12,))).
var valueOnlyAllow = map[string]bool{
	"builtins.int": true, "builtins.float": true, "builtins.str": true, "builtins.bytes": true, "builtins.bool": true,
	"builtins.list": true, "builtins.dict": true, "builtins.tuple": true, "numpy.ndarray": true,
}

// deniedGlobals are single names refused with their reason (their modules
// are otherwise allowed).
var deniedGlobals = map[string]string{
	"torch.load":                     "torch.load runs the full unpickler on a file it is given",
	"torch.storage._load_from_bytes": "it runs torch.load (weights_only=False) on its bytes argument: a nested pickle whose globals no verdict about this file covers",
	"numpy.load":                     "numpy.load unpickles object arrays (allow_pickle) from a file it is given",
	"numpy.DataSource":               "it opens files and URLs",
	"numpy.memmap":                   "it opens and maps a file",
	"numpy.fromfile":                 "it reads a file",
	"numpy.vectorize":                "it calls the function it holds",
	"numpy.frompyfunc":               "it calls the function it holds",
	"collections.namedtuple":         "namedtuple() builds a class with exec",
	"builtins.map":                   "it calls the function it holds when iterated",
	"builtins.filter":                "it calls the function it holds when iterated",
	"builtins.print":                 "it writes to a file",
}

// deniedModules are modules (and their submodules) no global may be
// allowed from, by reason.
var deniedModules = map[string]string{}

func init() {
	for why, mods := range map[string][]string{
		"torch's own weights_only loader blocks it whatever the user allows": {"sys", "os", "posix", "nt"},
		"it runs code, processes or threads": {"subprocess", "_posixsubprocess", "commands", "popen2", "runpy", "code", "codeop",
			"pty", "multiprocessing", "_multiprocessing", "threading", "_thread", "thread", "concurrent", "asyncio", "signal", "pdb", "bdb",
			"timeit", "trace", "profile", "cProfile", "doctest", "unittest", "IPython", "sched", "atexit", "gc", "weakref",
			"_weakref", "webbrowser", "cmd", "rlcompleter", "readline", "tkinter", "turtle", "idlelib", "_winapi", "msvcrt", "winreg",
			"torch.utils.benchmark", "torch.multiprocessing", "torch.distributed", "torch.testing", "torch.utils.bottleneck",
			"numpy.testing", "numpy.distutils", "numpy.f2py", "setuptools", "distutils", "pip", "_distutils_hack"},
		"it calls what it is given (a function wrapper)": {"functools", "_functools", "operator", "_operator", "itertools",
			"contextlib", "copy", "copyreg", "copy_reg", "dataclasses"},
		"it imports, compiles or loads code": {"importlib", "imp", "pkgutil", "zipimport", "modulefinder", "pydoc", "pkg_resources",
			"site", "sysconfig", "ctypes", "_ctypes", "cffi", "types", "typing", "inspect", "ast", "dis", "symtable", "compileall",
			"py_compile", "jinja2", "mako", "numba", "numexpr", "sympy", "Cython", "torch.jit", "torch._dynamo",
			"torch._inductor", "torch.fx", "torch.package", "torch.export", "torch.hub", "torch.utils.cpp_extension", "torch.ops",
			"torch.classes", "torch._C", "torch._ops", "torch.library", "torch.compiler", "torch.onnx", "torch.cuda",
			"numpy.ctypeslib", "numpy.lib.utils", "logging"},
		"it loads pickled or serialized objects with its own loader": {"pickle", "_pickle", "cPickle", "_compat_pickle",
			"pickletools", "marshal", "shelve", "dill", "cloudpickle", "joblib", "jsonpickle", "yaml", "_yaml", "ruamel",
			"torch.serialization", "torch.storage", "numpy.lib.npyio", "numpy.lib.format", "numpy.lib._npyio_impl",
			"numpy.lib._format_impl", "pandas.io", "pandas.compat.pickle_compat"},
		"it opens files, sockets or devices": {"io", "_io", "codecs", "_codecs", "fileinput", "tempfile", "shutil", "glob",
			"linecache", "tokenize", "zipfile", "tarfile", "gzip", "bz2", "lzma", "mmap", "dbm", "anydbm", "whichdb",
			"sqlite3", "_sqlite3", "mailbox", "socket", "_socket", "ssl", "select", "selectors", "socketserver", "SocketServer",
			"http", "urllib", "urllib2", "httplib", "ftplib", "smtplib", "poplib", "imaplib", "nntplib", "telnetlib",
			"xmlrpc", "xmlrpclib", "asyncore", "asynchat", "fcntl", "termios", "tty", "resource", "grp", "pwd", "faulthandler",
			"tracemalloc", "numpy.lib._datasource", "platform", "getpass", "wave", "aifc", "sunau"},
	} {
		for _, m := range mods {
			deniedModules[m] = why
		}
	}
}

// allowRefusal says why module.name (as Python 3 imports it) may not be
// allowed, or "" when it may.
func allowRefusal(module, name string) string {
	full := module + "." + name
	if module == "__builtin__" {
		full = "builtins." + name
	}
	if vettedAllow[full] {
		return ""
	}
	if why, ok := deniedGlobals[full]; ok {
		return why
	}
	for m := module; m != ""; {
		if why, ok := deniedModules[m]; ok {
			if m == module {
				return "module " + m + ": " + why
			}
			return "module " + m + " (of " + module + "): " + why
		}
		i := strings.LastIndexByte(m, '.')
		if i < 0 {
			break
		}
		m = m[:i]
	}
	if module == "builtins" || module == "__builtin__" {
		return "builtins." + name + " is not one of the inert builtin types (int, float, str, bytes, bool, list, dict, tuple, slice, range; set, frozenset, bytearray and complex are allowlisted)"
	}
	if stdlibModules[name] || deniedModules[name] != "" || name == "torch" || name == "numpy" {
		return name + " is a module, not a class: a module object handed to a pickle can have its globals overwritten by BUILD"
	}
	if !classLike(name) {
		return name + " is not a class name (CapWords): a function or a module; only classes, and a few vetted inert functions (numpy's scalar and _reconstruct), can be allowed"
	}
	return ""
}

// classLike reports whether name follows Python's class naming convention:
// an upper-case letter after any leading underscores.
func classLike(name string) bool {
	s := strings.TrimLeft(name, "_")
	return s != "" && s[0] >= 'A' && s[0] <= 'Z'
}

// compatName is the global Python 3's unpickler imports for module.name
// written in a protocol 0-2 pickle (fix_imports), or "" when it is the same.
func compatName(module, name string) (string, string, bool) {
	if v, ok := compatNames[module+"."+name]; ok {
		i := strings.LastIndexByte(v, '.')
		return v[:i], v[i+1:], true
	}
	if m, ok := compatImports[module]; ok {
		return m, name, true
	}
	return "", "", false
}
