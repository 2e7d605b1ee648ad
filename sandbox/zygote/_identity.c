/* The hot loop of sandbox/zygote/watch.py's check after each run, in C: whether the
 * namespaces of modules and classes still hold exactly the keys and values of their
 * baseline, by pointer identity, in order.
 *
 * It runs no Python code of the objects it compares (no __eq__, __hash__, __iter__,
 * no __dict__ property, no metaclass). namespace() finds, once, at the baseline, the
 * dict a module or a class keeps its attributes in (a module's with PyModule_GetDict,
 * a class's through type's own __dict__ getter: the mappingproxy it returns wraps the
 * class's real dict, which mappingproxy's C traverse hands over). Neither object can
 * be given another dict (a module's __dict__ is read-only, a class's has no setter),
 * so differing() walks those dicts after each run with PyDict_Next, allocating
 * nothing but its answer. The garbage collector is off during both calls, so that no
 * finalizer runs in the middle of them.
 *
 * Built against the stable ABI (Py_LIMITED_API 3.11): one _identity.abi3.so loads in
 * every interpreter jaxplay runs (3.11, 3.12, 3.13). reuse.py falls back to the same
 * check in pure Python where it is missing, and says so.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030B0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* type.__dict__["__dict__"] (a getset descriptor) and its __get__ slot; the
 * mappingproxy type and its traverse slot. Found once, at import. */
static PyObject *type_dict_descr;
static descrgetfunc type_dict_get;
static PyObject *mappingproxy_type;
static traverseproc mappingproxy_traverse;

static int
take_first(PyObject *obj, void *arg)
{
    PyObject **slot = (PyObject **)arg;
    if (*slot == NULL) {
        *slot = obj;
    }
    return 0;
}

/* A new reference to the dict behind ``obj``'s attributes: a module's own dict, a
 * class's own dict; NULL with an error: neither, or no exact dict behind it. */
static PyObject *
namespace_of(PyObject *obj)
{
    PyObject *d = NULL;
    if (PyModule_Check(obj)) {
        d = PyModule_GetDict(obj); /* borrowed */
        Py_XINCREF(d);
    }
    else if (PyType_Check(obj)) {
        PyObject *proxy = type_dict_get(type_dict_descr, obj, (PyObject *)Py_TYPE(obj));
        if (proxy == NULL) {
            return NULL;
        }
        if ((PyObject *)Py_TYPE(proxy) == mappingproxy_type) {
            mappingproxy_traverse(proxy, take_first, &d);
        }
        Py_XINCREF(d);
        Py_DECREF(proxy);
    }
    if (d == NULL || !PyDict_CheckExact(d)) {
        Py_XDECREF(d);
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "namespace() takes a module or a class");
        return NULL;
    }
    return d;
}

static PyObject *
namespace(PyObject *module, PyObject *obj)
{
    (void)module;
    int was_enabled = PyGC_Disable();
    PyObject *d = namespace_of(obj);
    if (was_enabled) {
        PyGC_Enable();
    }
    return d;
}

/* A baseline packed for the comparison: one array of pointers, read front to back
 * (a JAX process's ~77,000 attributes in ~3,000 namespaces: the tuples they come
 * from would be ~6,000 separate reads from memory that a run has since evicted).
 * Per entry: obj, its type, its dict, n, then n (key, value) pairs. The pointers
 * are kept valid by the capsule's context: a tuple of the entries themselves. */
#define BASELINE "sandbox.zygote._identity.Baseline"

typedef struct {
    Py_ssize_t count; /* entries */
    PyObject *words[];
} Packed;

static void
free_baseline(PyObject *capsule)
{
    PyObject *entries = (PyObject *)PyCapsule_GetContext(capsule);
    PyMem_Free(PyCapsule_GetPointer(capsule, BASELINE));
    Py_XDECREF(entries);
}

static PyObject *
pack_impl(PyObject *entries)
{
    Py_ssize_t count = PyTuple_Size(entries), words = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry = PyTuple_GetItem(entries, i);
        if (!PyTuple_Check(entry) || PyTuple_Size(entry) != 5 ||
            !PyType_Check(PyTuple_GetItem(entry, 1)) ||
            !PyDict_CheckExact(PyTuple_GetItem(entry, 2)) ||
            !PyTuple_Check(PyTuple_GetItem(entry, 3)) || !PyTuple_Check(PyTuple_GetItem(entry, 4)) ||
            PyTuple_Size(PyTuple_GetItem(entry, 3)) != PyTuple_Size(PyTuple_GetItem(entry, 4))) {
            PyErr_Format(PyExc_TypeError,
                         "entry %zd is not (object, type, dict, keys, values) with as many "
                         "keys as values",
                         i);
            return NULL;
        }
        words += 4 + 2 * PyTuple_Size(PyTuple_GetItem(entry, 3));
    }
    Packed *packed = PyMem_Malloc(sizeof(Packed) + (size_t)words * sizeof(PyObject *));
    if (packed == NULL) {
        return PyErr_NoMemory();
    }
    packed->count = count;
    PyObject **w = packed->words;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry = PyTuple_GetItem(entries, i);
        PyObject *keys = PyTuple_GetItem(entry, 3), *values = PyTuple_GetItem(entry, 4);
        Py_ssize_t n = PyTuple_Size(keys);
        *w++ = PyTuple_GetItem(entry, 0);
        *w++ = PyTuple_GetItem(entry, 1);
        *w++ = PyTuple_GetItem(entry, 2);
        *w++ = (PyObject *)(uintptr_t)n;
        for (Py_ssize_t j = 0; j < n; j++) {
            *w++ = PyTuple_GetItem(keys, j);
            *w++ = PyTuple_GetItem(values, j);
        }
    }
    PyObject *capsule = PyCapsule_New(packed, BASELINE, free_baseline);
    if (capsule == NULL) {
        PyMem_Free(packed);
        return NULL;
    }
    Py_INCREF(entries);
    if (PyCapsule_SetContext(capsule, entries) < 0) {
        Py_DECREF(entries);
        Py_DECREF(capsule);
        return NULL;
    }
    return capsule;
}

static PyObject *
pack(PyObject *module, PyObject *entries)
{
    (void)module;
    if (!PyList_Check(entries)) {
        PyErr_SetString(PyExc_TypeError, "pack() takes a list of entries");
        return NULL;
    }
    PyObject *copy = PyList_AsTuple(entries); /* the capsule's own: nothing can change it */
    if (copy == NULL) {
        return NULL;
    }
    PyObject *capsule = pack_impl(copy);
    Py_DECREF(copy);
    return capsule;
}

/* 1: dict ``d`` holds exactly the n (key, value) ``pairs``, in order, by identity. */
static int
same(PyObject *d, Py_ssize_t n, PyObject **pairs)
{
    if (PyDict_Size(d) != n) {
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value, **end = pairs + 2 * n;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (pairs == end || key != pairs[0] || value != pairs[1]) {
            return 0;
        }
        pairs += 2;
    }
    return pairs == end;
}

static PyObject *
differing_impl(Packed *packed)
{
    PyObject *found = PyList_New(0);
    if (found == NULL) {
        return NULL;
    }
    PyObject **w = packed->words;
    for (Py_ssize_t i = 0; i < packed->count; i++) {
        PyObject *obj = w[0], *kind = w[1], *d = w[2];
        Py_ssize_t n = (Py_ssize_t)(uintptr_t)w[3];
        int ok = (PyObject *)Py_TYPE(obj) == kind && same(d, n, w + 4);
        w += 4 + 2 * n;
        if (!ok) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(found, index) < 0) {
                Py_XDECREF(index);
                Py_DECREF(found);
                return NULL;
            }
            Py_DECREF(index);
        }
    }
    return found;
}

static PyObject *
differing(PyObject *module, PyObject *baseline)
{
    (void)module;
    Packed *packed = PyCapsule_GetPointer(baseline, BASELINE);
    if (packed == NULL) {
        return NULL;
    }
    int was_enabled = PyGC_Disable();
    PyObject *found = differing_impl(packed);
    if (was_enabled) {
        PyGC_Enable();
    }
    return found;
}

static PyMethodDef methods[] = {
    {"namespace", namespace, METH_O,
     "namespace(obj) -> dict\n\n"
     "The dict a module or a class keeps its attributes in (a class's, not a\n"
     "mappingproxy), found without running any code of obj. TypeError for anything\n"
     "else."},
    {"pack", pack, METH_O,
     "pack(entries) -> baseline\n\n"
     "entries: a list of (obj, type, dict, keys, values), dict a namespace(obj), keys\n"
     "and values tuples of one length. The baseline differing() takes (it keeps them\n"
     "alive)."},
    {"differing", differing, METH_O,
     "differing(baseline) -> list of int\n\n"
     "The indices of the packed entries whose obj is no longer of that exact type, or\n"
     "whose dict no longer holds exactly those keys and values, in that order,\n"
     "compared by identity. Runs no Python code of the objects compared."},
    {NULL, NULL, 0, NULL},
};

static int
find_slots(PyObject *module)
{
    (void)module;
    if (type_dict_descr != NULL) { /* imported again: found already */
        return 0;
    }
    PyObject *type_attrs = PyObject_GetAttrString((PyObject *)&PyType_Type, "__dict__");
    if (type_attrs == NULL) {
        return -1;
    }
    mappingproxy_type = (PyObject *)Py_TYPE(type_attrs);
    Py_INCREF(mappingproxy_type);
    type_dict_descr = PyMapping_GetItemString(type_attrs, "__dict__");
    Py_DECREF(type_attrs);
    if (type_dict_descr == NULL) {
        return -1;
    }
    type_dict_get = (descrgetfunc)PyType_GetSlot(Py_TYPE(type_dict_descr), Py_tp_descr_get);
    mappingproxy_traverse =
        (traverseproc)PyType_GetSlot((PyTypeObject *)mappingproxy_type, Py_tp_traverse);
    if (type_dict_get == NULL || mappingproxy_traverse == NULL) {
        PyErr_SetString(PyExc_ImportError, "type.__dict__ or mappingproxy lacks a C slot");
        return -1;
    }
    return 0;
}

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sandbox.zygote._identity",
    .m_doc = "Identity comparison of module and class namespaces (sandbox/zygote/watch.py).",
    .m_size = -1,
    .m_methods = methods,
};

/* Single-phase: its state is the process's (the objects above are the main
 * interpreter's), so isolated subinterpreters refuse it. */
PyMODINIT_FUNC
PyInit__identity(void)
{
    PyObject *module = PyModule_Create(&moduledef);
    if (module != NULL && find_slots(module) < 0) {
        Py_CLEAR(module);
    }
    return module;
}
