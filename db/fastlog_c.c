/* db/fastlog.py's _parse in C: a complete, well-formed log to the same Python values, or None where the Python
 * reader gives None (anything unusual: the reference reader, db/logformat.py, then names the error).
 *
 * The layout constants are not repeated here: fastlog.py passes them once to init() from db/logformat.py.
 * tests/test_db_fastlog.py checks this reader against the Python one on real logs and on damaged copies.
 * Every read is bounded by the buffer's length; a value the Python reader would reject (a u64 past INT64_MAX, a
 * file id seen twice, a folder id not seen) is rejected here the same way.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_SLOTS 64
#define MAX_PROC 32

static struct {
    int ready;
    char magic[8];
    unsigned version, bom, nc, nb, nslots, first, last, op_size, argv_key, mounts_key;
    unsigned r_proc, r_str, r_file, r_ops, r_dir, r_end;
    char proc_fmt[MAX_PROC];    /* struct codes of the PROC record: i (i32), I (u32), Q (u64) */
    unsigned proc_n, proc_size;
    PyObject *str_keys;         /* key -> name */
} C;

static uint16_t u16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static PyObject *init(PyObject *self, PyObject *args)
{
    const char *magic, *fmt;
    Py_ssize_t mlen, flen;
    PyObject *keys;
    (void)self;
    if (!PyArg_ParseTuple(args, "y#IIIIIIIIIs#O!IIIIII", &magic, &mlen, &C.version, &C.bom, &C.nc, &C.nb,
                          &C.first, &C.last, &C.op_size, &C.argv_key, &C.mounts_key, &fmt, &flen,
                          &PyDict_Type, &keys, &C.r_proc, &C.r_str, &C.r_file, &C.r_ops, &C.r_dir, &C.r_end))
        return NULL;
    C.nslots = C.nc + 2 * C.nb;
    if (mlen != 8 || flen >= MAX_PROC || C.nslots > MAX_SLOTS || C.first >= C.nslots || C.last >= C.nslots) {
        PyErr_SetString(PyExc_ValueError, "fastlog_c: layout out of range");
        return NULL;
    }
    memcpy(C.magic, magic, 8);
    C.proc_size = 0;
    for (Py_ssize_t i = 0; i < flen; i++) {
        if (!strchr("iIQ", fmt[i])) {
            PyErr_SetString(PyExc_ValueError, "fastlog_c: PROC format codes must be i, I or Q");
            return NULL;
        }
        C.proc_fmt[i] = fmt[i];
        C.proc_size += fmt[i] == 'Q' ? 8 : 4;
    }
    C.proc_n = (unsigned)flen;
    Py_XDECREF(C.str_keys);
    Py_INCREF(keys);
    C.str_keys = keys;
    C.ready = 1;
    Py_RETURN_NONE;
}

static PyObject *decode(const unsigned char *p, Py_ssize_t n)
{
    return PyUnicode_DecodeUTF8((const char *)p, n, "surrogateescape");
}

/* list.append(v) and dict[k] = v of new references (NULL: a Python error is set), released either way: 0, or -1 on
 * an error */
static int append_new(PyObject *list, PyObject *v)
{
    int r = v ? PyList_Append(list, v) : -1;
    Py_XDECREF(v);
    return r;
}
static int set_new(PyObject *dict, PyObject *k, PyObject *v)
{
    int r = k && v ? PyDict_SetItem(dict, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return r;
}

/* 1 when the log is well formed so far, 0 when the Python reader would give None, -1 on a Python error */
static int parse_into(const unsigned char *b, Py_ssize_t n, PyObject *out[5])
{
    PyObject *proc = NULL, *strings = out[1], *mounts = out[2], *files = out[3], *ops = out[4];
    PyObject *dirs = NULL, *fids = NULL;
    int rc = 0;
    uint64_t start = 0;
    Py_ssize_t off, nrec = 0;

    if (n < 32 || memcmp(b, C.magic, 8) || u16(b + 8) != C.version || u32(b + 12) != C.bom)
        return 0;
    off = u16(b + 10);
    if (!(dirs = PyDict_New()) || !(fids = PySet_New(NULL)))
        goto error;
    while (off + 8 <= n) {
        unsigned rtype = u16(b + off);
        uint64_t length = u32(b + off + 4);
        Py_ssize_t p = off + 8, end;
        if ((uint64_t)p + length > (uint64_t)n || length & 7)
            goto done;
        end = p + (Py_ssize_t)length;
        if (rtype == C.r_str || rtype == C.r_dir) {
            if (p + 8 > n)
                goto done;
            uint32_t key = u32(b + p), slen = u32(b + p + 4);
            if (8 + (uint64_t)slen > length)
                goto done;
            const unsigned char *raw = b + p + 8;
            int has_nul = memchr(raw, 0, slen) != NULL;
            if (rtype == C.r_dir) {
                if (has_nul)
                    goto done;
                PyObject *k = PyLong_FromUnsignedLong(key);
                if (set_new(dirs, k, k ? decode(raw, slen) : NULL))
                    goto error;
            } else if (key == C.argv_key) {
                PyObject *argv = PyList_New(0);
                if (!argv)
                    goto error;
                /* raw.split(b"\0")[:-1]: the pieces before each NUL */
                for (uint32_t i = 0, s = 0; i < slen; i++) {
                    if (raw[i])
                        continue;
                    if (append_new(argv, decode(raw + s, i - s))) {
                        Py_DECREF(argv);
                        goto error;
                    }
                    s = i + 1;
                }
                int bad = PyDict_SetItemString(strings, "argv", argv);
                Py_DECREF(argv);
                if (bad)
                    goto error;
            } else if (has_nul) {
                goto done;
            } else {
                PyObject *v = decode(raw, slen);
                if (!v)
                    goto error;
                if (key == C.mounts_key) {
                    if (append_new(mounts, v))
                        goto error;
                } else {
                    PyObject *k = PyLong_FromUnsignedLong(key), *name = k ? PyDict_GetItemWithError(C.str_keys, k)
                                                                          : NULL;
                    Py_XDECREF(k);
                    if (name && PyObject_IsTrue(name))
                        Py_INCREF(name);
                    else if (!PyErr_Occurred())
                        name = PyUnicode_FromFormat("str%u", key);
                    else
                        name = NULL;
                    if (set_new(strings, name, v))
                        goto error;
                }
            }
        } else if (rtype == C.r_file) {
            if (length < 32)
                goto done;
            const unsigned char *h = b + p;
            uint32_t fid = u32(h), nlen = u16(h + 6), did = u32(h + 8);
            unsigned flags = u16(h + 4), nc = h[12], nb = h[13];
            uint64_t mask = u64(h + 16), wide = u64(h + 24);
            if (nc != C.nc || nb != C.nb || mask >> C.nslots || wide & ~mask)
                goto done;
            PyObject *kfid = PyLong_FromUnsignedLong(fid);
            if (!kfid)
                goto error;
            int seen = PySet_Contains(fids, kfid);
            if (seen || PySet_Add(fids, kfid)) {
                Py_DECREF(kfid);
                if (seen == 1)
                    goto done;
                goto error;
            }
            uint64_t val[MAX_SLOTS];
            Py_ssize_t q = p + 32;
            for (unsigned k = 0; k < C.nslots; k++) {
                val[k] = 0;
                if (!(mask >> k & 1))
                    continue;
                int w = wide >> k & 1 ? 8 : 4;
                if (q + w > end) {
                    Py_DECREF(kfid);
                    goto done;
                }
                val[k] = w == 8 ? u64(b + q) : u32(b + q);
                q += w;
            }
            PyObject *kdid = PyLong_FromUnsignedLong(did);
            PyObject *dir = kdid ? PyDict_GetItemWithError(dirs, kdid) : NULL;
            Py_XDECREF(kdid);
            if (!dir || q + (Py_ssize_t)nlen > end) {
                Py_DECREF(kfid);
                if (PyErr_Occurred())
                    goto error;
                goto done;
            }
            /* v2 FILE timestamps are relative to the PROC record's start_ns */
            int bad = 0;
            if (mask >> C.first & 1)
                bad |= val[C.first] > (uint64_t)INT64_MAX - start, val[C.first] += start;
            if (mask >> C.last & 1)
                bad |= val[C.last] > (uint64_t)INT64_MAX - start, val[C.last] += start;
            for (unsigned k = 0; k < C.nslots && wide && !bad; k++)
                bad |= val[k] > (uint64_t)INT64_MAX;
            if (bad || memchr(b + q, 0, nlen)) {
                Py_DECREF(kfid);
                goto done;
            }
            PyObject *name = decode(b + q, nlen), *path = NULL, *vals = PyTuple_New(C.nslots), *row = NULL;
            if (name && vals) {
                path = PyUnicode_FromFormat("%U/%U", dir, name);
                for (unsigned k = 0; k < C.nslots; k++) {
                    PyObject *v = PyLong_FromUnsignedLongLong(val[k]);
                    if (!v) {
                        Py_CLEAR(path);
                        break;
                    }
                    PyTuple_SET_ITEM(vals, k, v);
                }
            }
            if (path)
                row = Py_BuildValue("(NINN)", kfid, flags, path, vals), kfid = path = vals = NULL;
            Py_XDECREF(kfid);
            Py_XDECREF(name);
            Py_XDECREF(path);
            Py_XDECREF(vals);
            if (append_new(files, row))
                goto error;
        } else if (rtype == C.r_proc) {
            if (length < C.proc_size)
                goto done;
            PyObject *t = PyTuple_New(C.proc_n);
            if (!t)
                goto error;
            Py_ssize_t q = p;
            for (unsigned k = 0; k < C.proc_n; k++) {
                PyObject *v;
                char c = C.proc_fmt[k];
                if (c == 'Q') {
                    uint64_t x = u64(b + q);
                    if (x > (uint64_t)INT64_MAX) {
                        Py_DECREF(t);
                        goto done;
                    }
                    if (k == 4)
                        start = x;
                    v = PyLong_FromUnsignedLongLong(x);
                    q += 8;
                } else {
                    v = c == 'i' ? PyLong_FromLong((int32_t)u32(b + q)) : PyLong_FromUnsignedLong(u32(b + q));
                    q += 4;
                }
                if (!v) {
                    Py_DECREF(t);
                    goto error;
                }
                PyTuple_SET_ITEM(t, k, v);
            }
            Py_XSETREF(proc, t);
        } else if (rtype == C.r_ops) {
            if (p + 6 > n)
                goto done;
            uint32_t count = u32(b + p);
            unsigned osize = u16(b + p + 4);
            if (osize != C.op_size || 8 + (uint64_t)count * osize != length)
                goto done;
            if (append_new(ops, Py_BuildValue("(Iy#)", count, (const char *)b + p + 8, (Py_ssize_t)(length - 8))))
                goto error;
        } else if (rtype == C.r_end) {
            if (p + 4 > n || u32(b + p) != (uint64_t)nrec || end != n || !proc)
                goto done;
            out[0] = proc;
            proc = NULL;
            rc = 1;
            goto done;
        } else {
            goto done;
        }
        off = end;
        nrec++;
    }
done:
    Py_XDECREF(proc);
    Py_XDECREF(dirs);
    Py_XDECREF(fids);
    return rc;
error:
    rc = -1;
    goto done;
}

static PyObject *parse(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    PyObject *out[5] = {NULL, PyDict_New(), PyList_New(0), PyList_New(0), PyList_New(0)}, *res = NULL;
    int rc = -1;
    (void)self;
    if (!C.ready) {
        PyErr_SetString(PyExc_RuntimeError, "fastlog_c: init() first");
        goto out;
    }
    if (!out[1] || !out[2] || !out[3] || !out[4] || PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE))
        goto out;
    rc = parse_into(view.buf, view.len, out);
    PyBuffer_Release(&view);
    if (rc == 1)
        res = PyTuple_Pack(5, out[0], out[1], out[2], out[3], out[4]);
    else if (rc == 0)
        res = Py_NewRef(Py_None);
out:
    for (int i = 0; i < 5; i++)
        Py_XDECREF(out[i]);
    return res;
}

static PyMethodDef methods[] = {
    {"init", init, METH_VARARGS, "init(magic, version, bom, nc, nb, first, last, op_size, argv_key, mounts_key, "
                                 "proc_fmt, str_keys, r_proc, r_str, r_file, r_ops, r_dir, r_end): the layout"},
    {"parse", parse, METH_O, "parse(buf) -> (proc, strings, mounts, files, ops) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastlog_c", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_fastlog_c(void) { return PyModule_Create(&module); }
