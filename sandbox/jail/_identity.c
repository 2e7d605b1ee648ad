/* The hot loop of sandbox/jail/reuse.py's check after each run, in C: whether the
 * namespaces of modules and classes still hold exactly the keys and values of their
 * baseline, by pointer identity, in order.
 *
 * It runs no Python code of the objects it compares (no __eq__, __hash__, __iter__,
 * no __dict__ property, no metaclass): a module's dict is read with PyModule_GetDict,
 * a class's through type's own __dict__ getter (the mappingproxy it returns wraps the
 * class's real dict, which mappingproxy's C traverse hands over), and dicts are walked
 * with PyDict_Next. The garbage collector is off during the call, so that no
 * finalizer runs in the middle of it.
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
 * class's own dict. NULL with no error set: neither a module nor a class, or not
 * an exact dict behind it (the caller counts that as changed). NULL with an error:
 * out of memory. */
static PyObject *
namespace_of(PyObject *obj)
{
    if (PyModule_Check(obj)) {
        PyObject *d = PyModule_GetDict(obj); /* borrowed */
        if (d == NULL || !PyDict_CheckExact(d)) {
            PyErr_Clear();
            return NULL;
        }
        Py_INCREF(d);
        return d;
    }
    if (PyType_Check(obj)) {
        PyObject *proxy = type_dict_get(type_dict_descr, obj, (PyObject *)Py_TYPE(obj));
        if (proxy == NULL) {
            return NULL;
        }
        PyObject *d = NULL;
        if ((PyObject *)Py_TYPE(proxy) == mappingproxy_type) {
            mappingproxy_traverse(proxy, take_first, &d);
        }
        if (d != NULL && PyDict_CheckExact(d)) {
            Py_INCREF(d);
        }
        else {
            d = NULL;
        }
        Py_DECREF(proxy);
        return d;
    }
    return NULL;
}

/* 1: ``d`` holds exactly ``keys`` and ``values`` (tuples), in order, by identity;
 * 0: it does not. */
static int
same(PyObject *d, PyObject *keys, PyObject *values)
{
    Py_ssize_t n = PyTuple_Size(keys);
    if (n < 0 || PyTuple_Size(values) != n || PyDict_Size(d) != n) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (i >= n || key != PyTuple_GetItem(keys, i) || value != PyTuple_GetItem(values, i)) {
            return 0;
        }
        i++;
    }
    return i == n;
}

static PyObject *
differing_impl(PyObject *entries)
{
    PyObject *found = PyList_New(0);
    if (found == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyList_Size(entries);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry = PyList_GetItem(entries, i); /* borrowed */
        int ok = 0;
        if (entry != NULL && PyTuple_Check(entry) && PyTuple_Size(entry) == 4) {
            PyObject *obj = PyTuple_GetItem(entry, 0);
            PyObject *kind = PyTuple_GetItem(entry, 1);
            PyObject *keys = PyTuple_GetItem(entry, 2);
            PyObject *values = PyTuple_GetItem(entry, 3);
            if ((PyObject *)Py_TYPE(obj) == kind && PyTuple_Check(keys) && PyTuple_Check(values)) {
                PyObject *d = namespace_of(obj);
                if (d == NULL && PyErr_Occurred()) {
                    Py_DECREF(found);
                    return NULL;
                }
                if (d != NULL) {
                    ok = same(d, keys, values);
                    Py_DECREF(d);
                }
            }
        }
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
differing(PyObject *module, PyObject *entries)
{
    (void)module;
    if (!PyList_CheckExact(entries)) {
        PyErr_SetString(PyExc_TypeError, "differing() takes a list of "
                                         "(object, type, keys tuple, values tuple)");
        return NULL;
    }
    int was_enabled = PyGC_Disable();
    PyObject *found = differing_impl(entries);
    if (was_enabled) {
        PyGC_Enable();
    }
    return found;
}

static PyMethodDef methods[] = {
    {"differing", differing, METH_O,
     "differing(entries) -> list of int\n\n"
     "entries: a list of (obj, type, keys, values), obj a module or a class, keys and\n"
     "values tuples. Returns the indices of the entries whose obj is no longer of that\n"
     "exact type, or whose own dict (a module's, a class's) no longer holds exactly\n"
     "those keys and values, in that order, compared by identity. Runs no Python\n"
     "code of the objects compared."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *module)
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
    .m_name = "sandbox.jail._identity",
    .m_doc = "Identity comparison of module and class namespaces (sandbox/jail/reuse.py).",
    .m_size = -1,
    .m_methods = methods,
};

/* Single-phase: its state is the process's (the objects above are the main
 * interpreter's), so isolated subinterpreters refuse it. */
PyMODINIT_FUNC
PyInit__identity(void)
{
    PyObject *module = PyModule_Create(&moduledef);
    if (module != NULL && exec_module(module) < 0) {
        Py_CLEAR(module);
    }
    return module;
}
