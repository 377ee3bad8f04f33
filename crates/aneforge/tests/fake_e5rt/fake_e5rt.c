/*
 * A fake of Espresso's e5rt C API, for testing aneforge's Ane executor on Linux. It exports
 * the symbol names and signatures aneforge's table declares (src/exec/ane/e5rt.rs), records
 * every call, allocates real buffers (filled with 0xA5, so the executor must zero them),
 * checks that every handle is released exactly once and by the expected convention, and
 * runs a trivial program: every output element i = input0[i mod n] + 1 (fp16 or uint8).
 * It reads the model.mil it is given to learn the port names, dtypes and sizes.
 *
 * Not Apple's code and not a model of its internals: a stand-in that makes data flow.
 * Build variants: -DFAKE_OMIT_ENCODE (drops a required symbol), -DFAKE_UNDERSCORE_EXECUTE
 * (exports execute_sync only with a leading underscore), -DFAKE_NO_LAST_ERROR.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int64_t status;

#define MAGIC 0xE5E5F00Du
#define MAX_PORTS 16
#define MAX_OBJS 65536
#define MAX_STREAM_OPS 8

enum kind { CONFIG = 1, COMPILER, OPTIONS, LIBRARY, FUNCTION, OP_OPTIONS, OP, PORT, BUFFER, STREAM };
static const char *KIND[] = {"?", "config", "compiler", "options", "library", "function", "op_options", "op", "port", "buffer", "stream"};

typedef struct {
    char name[64];
    int fp16; /* 1: fp16, 0: uint8 */
    size_t numel;
} port_t;

typedef struct {
    int n_in, n_out;
    port_t in[MAX_PORTS], out[MAX_PORTS];
} prog_t;

typedef struct obj {
    uint32_t magic;
    int kind, released, id;
    char text[512]; /* config/compiler: cache dir; options: segmenter; op_options: name */
    uint64_t mask;
    prog_t prog;                      /* library, function, op_options, op */
    struct obj *bound[2 * MAX_PORTS]; /* op: the buffer bound to each port (inputs, then outputs) */
    int encoded;                      /* op */
    struct obj *op;                   /* port */
    int index;                        /* port: index into op->bound */
    unsigned char *data;              /* buffer */
    size_t size;                      /* buffer */
    struct obj *ops[MAX_STREAM_OPS];  /* stream */
    int n_ops;                        /* stream */
} obj;

static obj *objs[MAX_OBJS];
static int n_objs;
static char log_buf[1 << 20];
static size_t log_len;
static __thread char last_error[1024];
static char fail_fn[128];
static int fail_nth, fail_seen;
static status fail_status;
static int status_high, release_by_value, bad_releases;

/* ---- test controls (not part of e5rt) ---- */

/* Forget every object and call, clear failure injection and modes. */
void fake_e5rt_reset(void) {
    n_objs = 0;
    log_len = 0;
    log_buf[0] = 0;
    fail_fn[0] = 0;
    fail_nth = fail_seen = 0;
    status_high = release_by_value = bad_releases = 0;
}

/* Make the nth call (1-based) of function `fn` fail with `code`. */
void fake_e5rt_fail(const char *fn, int nth, status code) {
    snprintf(fail_fn, sizeof fail_fn, "%s", fn);
    fail_nth = nth;
    fail_seen = 0;
    fail_status = code;
}

/* high: successes carry garbage in the upper 32 bits; by_value: releases expect the handle itself. */
void fake_e5rt_mode(int high, int by_value) {
    status_high = high;
    release_by_value = by_value;
}

/* Every call so far, one line each: "function details". */
const char *fake_e5rt_log(void) { return log_buf; }

/* Objects created and not (successfully) released. */
int fake_e5rt_live(void) {
    int n = 0;
    for (int i = 0; i < n_objs; i++) n += !objs[i]->released;
    return n;
}

/* Releases that were wrong: unknown handle, wrong kind, wrong convention, or a second release. */
int fake_e5rt_bad_releases(void) { return bad_releases; }

/* ---- plumbing ---- */

static void logf_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(log_buf + log_len, sizeof log_buf - log_len - 1, fmt, ap);
    va_end(ap);
    if (n > 0 && log_len + (size_t)n < sizeof log_buf - 2) {
        log_len += (size_t)n;
        log_buf[log_len++] = '\n';
        log_buf[log_len] = 0;
    }
}

static status ok(void) { return status_high ? (status)0x5A5A5A5A00000000LL : 0; }

static status fail(status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

/* The public name of the calling function (without a leading underscore). */
#define NAME (__func__[0] == '_' ? __func__ + 1 : __func__)

/* Log the call; fail it if the test asked for that. */
#define ENTER(fmt, ...)                                                                   \
    do {                                                                                  \
        logf_("%s" fmt, NAME, ##__VA_ARGS__);                                             \
        if (fail_fn[0] && !strcmp(NAME, fail_fn) && ++fail_seen == fail_nth)              \
            return fail(fail_status, "fake e5rt: injected failure in %s", NAME);         \
    } while (0)

static obj *new_obj(int kind) {
    if (n_objs >= MAX_OBJS) return NULL;
    obj *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->magic = MAGIC;
    o->kind = kind;
    o->id = n_objs;
    objs[n_objs++] = o;
    return o;
}

/* A live object of `kind`, or NULL. */
static obj *get(void *h, int kind) {
    obj *o = h;
    return o && o->magic == MAGIC && o->kind == kind && !o->released ? o : NULL;
}

#define GET(var, h, kind)                                                                              \
    obj *var = get(h, kind);                                                                           \
    if (!var) return fail(1, "fake e5rt: %s: argument is not a live %s handle", NAME, KIND[kind]);

#define MAKE(var, out, kind)                                                                           \
    if (!(out)) return fail(1, "fake e5rt: %s: out-pointer is NULL", NAME);                           \
    obj *var = new_obj(kind);                                                                          \
    if (!var) return fail(3, "fake e5rt: %s: out of handles", NAME);                                   \
    *(out) = var;

static status release(void *arg, int kind, const char *fn) {
    obj *o = NULL;
    int by_value = 0;
    if (arg && ((obj *)arg)->magic == MAGIC) {
        o = arg;
        by_value = 1;
    } else if (arg && *(obj **)arg && (*(obj **)arg)->magic == MAGIC) {
        o = *(obj **)arg;
    }
    logf_("%s %s#%d", fn, o ? KIND[o->kind] : "?", o ? o->id : -1);
    if (fail_fn[0] && !strcmp(fn, fail_fn) && ++fail_seen == fail_nth) return fail(fail_status, "fake e5rt: injected failure in %s", fn);
    if (!o) return bad_releases++, fail(1, "fake e5rt: %s: not a handle", fn);
    if (by_value != release_by_value)
        return bad_releases++, fail(2, "fake e5rt: %s: handle passed by %s, expected by %s", fn, by_value ? "value" : "address",
                                    release_by_value ? "value" : "address");
    if (o->kind != kind) return bad_releases++, fail(1, "fake e5rt: %s: a %s handle, expected %s", fn, KIND[o->kind], KIND[kind]);
    if (o->released) return bad_releases++, fail(2, "fake e5rt: %s: %s#%d released twice", fn, KIND[kind], o->id);
    o->released = 1;
    if (kind == BUFFER) {
        free(o->data);
        o->data = NULL;
    }
    if (!by_value) *(obj **)arg = NULL;
    return ok();
}

#define RELEASE(fn, kind) \
    status fn(void *h) { return release(h, kind, #fn); }

/* ---- fp16 ---- */

static float h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, f;
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        return s ? -v : v;
    }
    f = e == 31 ? s | 0x7f800000u | (m << 13) : s | ((e + 112) << 23) | (m << 13);
    float r;
    memcpy(&r, &f, 4);
    return r;
}

static uint16_t f2h(float v) {
    uint32_t x;
    memcpy(&x, &v, 4);
    uint32_t s = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return (uint16_t)(s | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0));
    if (x >= 0x477ff000u) return (uint16_t)(s | 0x7c00u);
    if (x < 0x38800000u) {
        float a, q;
        memcpy(&a, &x, 4);
        q = a * 0x1p24f;
        uint32_t r = (uint32_t)q;
        float frac = q - (float)r;
        if (frac > 0.5f || (frac == 0.5f && (r & 1))) r++;
        return (uint16_t)(s | r);
    }
    uint32_t h = (((x >> 23) - 112) << 10) | ((x & 0x7fffffu) >> 13), rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(s | h);
}

/* ---- MIL ---- */

/* Parse "tensor<fp16|uint8, [d0, ...]> NAME" at *p and advance past the name. */
static int parse_decl(const char **p, port_t *out) {
    const char *s = *p;
    if (strncmp(s, "tensor<", 7)) return -1;
    s += 7;
    if (!strncmp(s, "fp16", 4)) out->fp16 = 1, s += 4;
    else if (!strncmp(s, "uint8", 5)) out->fp16 = 0, s += 5;
    else return -1;
    if (strncmp(s, ", [", 3)) return -1;
    s += 3;
    out->numel = 1;
    while (*s != ']') {
        char *e;
        unsigned long d = strtoul(s, &e, 10);
        if (e == s) return -1;
        out->numel *= d;
        s = e;
        while (*s == ',' || *s == ' ') s++;
    }
    if (strncmp(s, "]> ", 3)) return -1;
    s += 3;
    size_t n = strcspn(s, " ,)=");
    if (n == 0 || n >= sizeof out->name) return -1;
    memcpy(out->name, s, n);
    out->name[n] = 0;
    *p = s + n;
    return 0;
}

/* Ports of `func main` in `text`; returns NULL or what is wrong. */
static const char *parse_mil(const char *text, prog_t *prog) {
    const char *s = strstr(text, "func main");
    if (!s || !(s = strchr(s, '('))) return "no 'func main(' found";
    for (s++; *s != ')';) {
        if (prog->n_in == MAX_PORTS) return "too many inputs";
        if (parse_decl(&s, &prog->in[prog->n_in++])) return "bad input declaration";
        while (*s == ',' || *s == ' ') s++;
    }
    const char *r = strstr(s, "} -> (");
    if (!r) return "no '} -> (' found";
    for (r += 6; *r != ')';) {
        if (prog->n_out == MAX_PORTS) return "too many outputs";
        port_t *o = &prog->out[prog->n_out++];
        size_t n = strcspn(r, ", )");
        if (n == 0 || n >= sizeof o->name) return "bad output name";
        memcpy(o->name, r, n);
        o->name[n] = 0;
        int found = 0;
        for (const char *line = text; line && !found; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
            /* "tensor<..> a = op(..)" or, for several results, "tensor<..> a, tensor<..> b = op(..)" */
            port_t decl;
            for (const char *d = line + strspn(line, " "); !found && !parse_decl(&d, &decl); d += strspn(d, ", ")) {
                found = !strcmp(decl.name, o->name);
                if (found) o->fp16 = decl.fp16, o->numel = decl.numel;
            }
        }
        if (!found) return "an output has no declaration";
        for (r += n; *r == ',' || *r == ' ';) r++;
    }
    return NULL;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) buf[n] = 0;
    else free(buf), buf = NULL;
    fclose(f);
    return buf;
}

/* ---- compiler ---- */

status e5rt_e5_compiler_config_options_create(void **out) {
    ENTER("");
    MAKE(o, out, CONFIG);
    return ok();
}

status e5rt_e5_compiler_config_options_set_cache_bundle_location(void *cfg, const char *dir) {
    ENTER(" %s", dir ? dir : "(null)");
    GET(c, cfg, CONFIG);
    if (!dir) return fail(1, "fake e5rt: cache location is NULL");
    snprintf(c->text, sizeof c->text, "%s", dir);
    return ok();
}

status e5rt_e5_compiler_create_with_config(void **out, void *cfg) {
    ENTER("");
    GET(c, cfg, CONFIG);
    MAKE(o, out, COMPILER);
    memcpy(o->text, c->text, sizeof o->text);
    return ok();
}

status e5rt_e5_compiler_options_create(void **out) {
    ENTER("");
    MAKE(o, out, OPTIONS);
    return ok();
}

status e5rt_e5_compiler_options_set_compute_device_types_mask(void *opts, uint64_t mask) {
    ENTER(" 0x%llx", (unsigned long long)mask);
    GET(o, opts, OPTIONS);
    o->mask = mask;
    return ok();
}

status e5rt_e5_compiler_options_set_force_recompilation(void *opts, int on) {
    ENTER(" %d", on);
    GET(o, opts, OPTIONS);
    return ok();
}

status e5rt_e5_compiler_options_set_segmenter(void *opts, const char *segmenter) {
    ENTER(" %s", segmenter ? segmenter : "(null)");
    GET(o, opts, OPTIONS);
    if (!segmenter || strcmp(segmenter, "graph")) return fail(1, "fake e5rt: unknown segmenter");
    return ok();
}

status e5rt_e5_compiler_options_set_custom_ane_compiler_options(void *opts, const char *s) {
    ENTER(" %s", s ? s : "(null)");
    GET(o, opts, OPTIONS);
    return ok();
}

status e5rt_e5_compiler_compile(void *compiler, const char *path, void *opts, void **out) {
    ENTER(" %s", path ? path : "(null)");
    GET(c, compiler, COMPILER);
    GET(o, opts, OPTIONS);
    char *text = path ? read_file(path) : NULL;
    if (!text) return fail(11, "fake e5rt: cannot read %s", path ? path : "(null)");
    prog_t prog = {0};
    const char *why = parse_mil(text, &prog);
    free(text);
    if (why) return fail(11, "fake e5rt: cannot compile %s: %s", path, why);
    if (c->text[0]) {
        char dir[600], file[640];
        snprintf(dir, sizeof dir, "%s/fake.bundle", c->text);
        mkdir(c->text, 0755);
        mkdir(dir, 0755);
        snprintf(file, sizeof file, "%s/analytics.mil", dir);
        FILE *f = fopen(file, "w");
        if (f) fprintf(f, "SelectedBackend = string(\"%s\")\n", o->mask & 4 ? "fake-ane" : "fake-bnns"), fclose(f);
    }
    MAKE(lib, out, LIBRARY);
    lib->prog = prog;
    return ok();
}

RELEASE(e5rt_e5_compiler_config_options_release, CONFIG)
RELEASE(e5rt_e5_compiler_release, COMPILER)
RELEASE(e5rt_e5_compiler_options_release, OPTIONS)

/* ---- library, function, operation ---- */

status e5rt_program_library_retain_program_function(void *library, const char *name, void **out) {
    ENTER(" %s", name ? name : "(null)");
    GET(l, library, LIBRARY);
    if (!name || strcmp(name, "main")) return fail(1, "fake e5rt: no function named '%s'", name ? name : "(null)");
    MAKE(f, out, FUNCTION);
    f->prog = l->prog;
    return ok();
}

status e5rt_precompiled_compute_op_create_options_create_with_program_function(void **out, void *function) {
    ENTER("");
    GET(f, function, FUNCTION);
    MAKE(o, out, OP_OPTIONS);
    o->prog = f->prog;
    return ok();
}

status e5rt_precompiled_compute_op_create_options_set_operation_name(void *opts, const char *name) {
    ENTER(" %s", name ? name : "(null)");
    GET(o, opts, OP_OPTIONS);
    snprintf(o->text, sizeof o->text, "%s", name ? name : "");
    return ok();
}

status e5rt_precompiled_compute_op_create_options_set_allocate_intermediate_buffers(void *opts, int on) {
    ENTER(" %d", on);
    GET(o, opts, OP_OPTIONS);
    return ok();
}

status e5rt_execution_stream_operation_create_precompiled_compute_operation_with_options(void **out, void *opts) {
    ENTER("");
    GET(o, opts, OP_OPTIONS);
    if (!o->text[0]) return fail(1, "fake e5rt: the operation has no name");
    MAKE(op, out, OP);
    op->prog = o->prog;
    return ok();
}

static status retain_port(void *operation, const char *name, void **out, int input, const char *fn) {
    obj *op = get(operation, OP);
    if (!op) return fail(1, "fake e5rt: %s: not a live op handle", fn);
    prog_t *p = &op->prog;
    int n = input ? p->n_in : p->n_out;
    for (int i = 0; i < n && name; i++) {
        if (strcmp((input ? p->in : p->out)[i].name, name)) continue;
        if (!out) return fail(1, "fake e5rt: %s: out-pointer is NULL", fn);
        obj *port = new_obj(PORT);
        if (!port) return fail(3, "fake e5rt: out of handles");
        port->op = op;
        port->index = input ? i : p->n_in + i;
        *out = port;
        return ok();
    }
    return fail(1, "fake e5rt: the operation has no %s port '%s'", input ? "input" : "output", name ? name : "(null)");
}

status e5rt_execution_stream_operation_retain_input_port(void *op, const char *name, void **out) {
    ENTER(" %s", name ? name : "(null)");
    return retain_port(op, name, out, 1, NAME);
}

status e5rt_execution_stream_operation_retain_output_port(void *op, const char *name, void **out) {
    ENTER(" %s", name ? name : "(null)");
    return retain_port(op, name, out, 0, NAME);
}

RELEASE(e5rt_program_library_release, LIBRARY)
RELEASE(e5rt_program_function_release, FUNCTION)
RELEASE(e5rt_precompiled_compute_op_create_options_release, OP_OPTIONS)
RELEASE(e5rt_execution_stream_operation_release, OP)

/* ---- ports and buffers ---- */

static port_t *spec(obj *op, int index) {
    prog_t *p = &op->prog;
    return index < p->n_in ? &p->in[index] : &p->out[index - p->n_in];
}

status e5rt_io_port_bind_buffer_object(void *port, void *buffer) {
    obj *pp = get(port, PORT), *bb = get(buffer, BUFFER);
    logf_("%s %s buffer#%d", NAME, pp ? spec(pp->op, pp->index)->name : "?", bb ? bb->id : -1);
    if (fail_fn[0] && !strcmp(NAME, fail_fn) && ++fail_seen == fail_nth) return fail(fail_status, "fake e5rt: injected failure in %s", NAME);
    if (!pp || !bb) return fail(1, "fake e5rt: %s: not a live port and buffer", NAME);
    if (pp->op->encoded) return fail(2, "fake e5rt: bindings are frozen once the operation is encoded");
    port_t *s = spec(pp->op, pp->index);
    size_t need = s->numel * (s->fp16 ? 2 : 1);
    if (bb->size < need) return fail(1, "fake e5rt: buffer of %zu bytes is too small for port '%s' (%zu bytes)", bb->size, s->name, need);
    pp->op->bound[pp->index] = bb;
    return ok();
}

status e5rt_buffer_object_alloc(void **out, size_t size, uint32_t type) {
    ENTER(" %zu %u", size, type);
    if (type != 0) return fail(5, "fake e5rt: only buffer type 0 is simulated");
    MAKE(b, out, BUFFER);
    b->data = malloc(size ? size : 1);
    if (!b->data) return fail(3, "fake e5rt: out of memory");
    memset(b->data, 0xA5, size);
    b->size = size;
    return ok();
}

status e5rt_buffer_object_get_data_ptr(void *buffer, void **out) {
    ENTER("");
    GET(b, buffer, BUFFER);
    if (!out) return fail(1, "fake e5rt: out-pointer is NULL");
    *out = b->data;
    return ok();
}

RELEASE(e5rt_io_port_release, PORT)
RELEASE(e5rt_buffer_object_release, BUFFER)

/* ---- stream ---- */

status e5rt_execution_stream_create(void **out) {
    ENTER("");
    MAKE(s, out, STREAM);
    return ok();
}

#ifndef FAKE_OMIT_ENCODE
status e5rt_execution_stream_encode_operation(void *stream, void *operation) {
    ENTER("");
    GET(s, stream, STREAM);
    GET(op, operation, OP);
    if (op->encoded) return fail(2, "fake e5rt: the operation is already encoded");
    if (s->n_ops == MAX_STREAM_OPS) return fail(3, "fake e5rt: too many operations on one stream");
    for (int i = 0; i < op->prog.n_in + op->prog.n_out; i++)
        if (!op->bound[i]) return fail(2, "fake e5rt: port '%s' has no buffer bound", spec(op, i)->name);
    op->encoded = 1;
    s->ops[s->n_ops++] = op;
    return ok();
}
#endif

static float load(obj *b, port_t *p, size_t i) {
    if (!p->fp16) return b->data[i];
    uint16_t h;
    memcpy(&h, b->data + 2 * i, 2);
    return h2f(h);
}

static void store(obj *b, port_t *p, size_t i, float v) {
    if (!p->fp16) {
        b->data[i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
        return;
    }
    uint16_t h = f2h(v);
    memcpy(b->data + 2 * i, &h, 2);
}

/* The fake program: output_j[i] = input_0[i mod n] + 1 (1 when there is no input). */
static status run(obj *op) {
    prog_t *p = &op->prog;
    for (int i = 0; i < p->n_in + p->n_out; i++)
        if (op->bound[i]->released) return fail(2, "fake e5rt: the buffer of port '%s' was released while bound", spec(op, i)->name);
    for (int j = 0; j < p->n_out; j++) {
        obj *ob = op->bound[p->n_in + j];
        for (size_t i = 0; i < p->out[j].numel; i++) {
            float v = p->n_in ? load(op->bound[0], &p->in[0], i % p->in[0].numel) : 0.0f;
            store(ob, &p->out[j], i, v + 1.0f);
        }
    }
    return 0;
}

#ifdef FAKE_UNDERSCORE_EXECUTE
#define EXECUTE_SYNC _e5rt_execution_stream_execute_sync
#else
#define EXECUTE_SYNC e5rt_execution_stream_execute_sync
#endif

status EXECUTE_SYNC(void *stream) {
    ENTER("");
    GET(s, stream, STREAM);
    if (!s->n_ops) return fail(2, "fake e5rt: nothing is encoded on this stream");
    for (int k = 0; k < s->n_ops; k++) {
        status st = run(s->ops[k]);
        if (st) return st;
    }
    return ok();
}

status e5rt_execution_stream_submit_async(void *stream, void *block) {
    ENTER("");
    (void)stream, (void)block;
    return fail(2, "fake e5rt: submit_async is not simulated");
}

RELEASE(e5rt_execution_stream_release, STREAM)

#ifndef FAKE_NO_LAST_ERROR
const char *e5rt_get_last_error_message(void) { return last_error; }
#endif
