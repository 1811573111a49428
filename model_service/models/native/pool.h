/* The native step's threads (llama_step.c includes this): a matrix product's weight rows split into chunks that the
 * calling thread and the pool's workers take in turn, each output row computed whole by whoever took its chunk, with
 * the sums products.h writes for it. So the numbers are the same at any thread count and any split (the tests
 * compare them bit for bit); the threads only share the reading of the weights, which is what a step costs.
 *
 * A chunk is claimed from one 64-bit ticket (the job's generation, its count of chunks, the next chunk's index), so a
 * worker that comes late to a job finds its generation gone or its chunks taken and touches nothing; the caller
 * waits only for the workers that hold a chunk, never for one the system has not scheduled yet (on a busy machine
 * the caller does the work alone).
 * Between jobs a worker spins briefly (a step's products follow each other within microseconds), then sleeps on a
 * condition variable; at a step's end it sleeps at once and the next step wakes it: an idle room costs no CPU. ntp_threads(n) sets the count (the caller's thread and n - 1
 * workers); a step called from two threads at once runs the second alone; a forked child starts with none. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define MAX_THREADS 64
/* how long a worker spins for the next job before it sleeps (0.2 ms: a room's attention between two products) */
#define SPIN_NS 200000

typedef struct {
    const Matrix *m;
    const float *const *xs;
    float *const *ys;
    int n, rows, chunk, chunks;  /* chunks < 2^16 (about four a thread) */
} Job;

static struct {
    _Atomic uint64_t ticket;   /* generation << 32 | chunks << 16 | next chunk */
    _Atomic int inflight;      /* workers that may hold a chunk of the current job */
    _Atomic int sleepers;
    _Atomic int busy;          /* a step holds the pool */
    _Atomic int quit;
    _Atomic int resting;       /* between steps: a worker sleeps at once instead of spinning */
    Job job;
    _Atomic int workers;
    int forks_watched;
    pthread_t tid[MAX_THREADS];
    pthread_mutex_t lock;
    pthread_cond_t wake;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void product_range(const Matrix *m, const float *const *xs, float *const *ys, int n, int r0, int r1);

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Take chunks of generation `gen` until none is left; `counted`: the caller is a worker (it says it may hold one).
 * Whether a chunk is there is read from the ticket alone: the job's fields are read only under a claim. */
static void take_chunks(uint32_t gen, int counted) {
    for (;;) {
        if (counted) atomic_fetch_add(&pool.inflight, 1);
        uint64_t t = atomic_load(&pool.ticket);
        int open = (uint32_t)(t >> 32) == gen && (t & 0xFFFF) < ((t >> 16) & 0xFFFF);
        int claimed = open && atomic_compare_exchange_strong(&pool.ticket, &t, t + 1);
        if (claimed) {
            const Job *j = &pool.job;
            int r0 = (int)(t & 0xFFFF) * j->chunk, r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
            product_range(j->m, j->xs, j->ys, j->n, r0, r1);
        }
        if (counted) atomic_fetch_sub(&pool.inflight, 1);
        if (!open) return;  /* (open but not claimed: another thread took that chunk first) */
    }
}

static void *worker(void *unused) {
    (void)unused;
    uint32_t seen = (uint32_t)(atomic_load(&pool.ticket) >> 32);
    for (;;) {
        int64_t until = now_ns() + SPIN_NS;
        uint32_t gen;
        for (int i = 0;; i++) {
            gen = (uint32_t)(atomic_load(&pool.ticket) >> 32);
            if (gen != seen || atomic_load(&pool.quit)) break;
            relax();
            if ((i & 255) == 255 && (atomic_load(&pool.resting) || now_ns() > until)) {  /* sleep until a job comes */
                pthread_mutex_lock(&pool.lock);
                atomic_fetch_add(&pool.sleepers, 1);
                while ((uint32_t)(atomic_load(&pool.ticket) >> 32) == seen && !atomic_load(&pool.quit))
                    pthread_cond_wait(&pool.wake, &pool.lock);
                atomic_fetch_sub(&pool.sleepers, 1);
                pthread_mutex_unlock(&pool.lock);
            }
        }
        if (atomic_load(&pool.quit)) return NULL;
        seen = gen;
        take_chunks(gen, 1);
    }
}

static void stop_workers(void) {
    atomic_store(&pool.quit, 1);
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.workers; i++) pthread_join(pool.tid[i], NULL);
    pool.workers = 0;
    atomic_store(&pool.quit, 0);
}

static void forked_child(void) {  /* a forked child has the caller's thread only (its parent's workers stay there) */
    pool.workers = 0;
    atomic_store(&pool.busy, 0);
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.inflight, 0);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
}

/* The step's threads: the caller's and n - 1 workers (n is clamped to 1..MAX_THREADS). Returns the count set. */
int ntp_threads(int n) {
    n = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&pool.busy, &expected, 1)) return pool.workers + 1;  /* a step runs */
    if (!pool.forks_watched) pool.forks_watched = pthread_atfork(NULL, NULL, forked_child) == 0;
    if (pool.workers != n - 1) {
        if (pool.workers) stop_workers();
        for (int i = 0; i < n - 1; i++)
            if (pthread_create(&pool.tid[i], NULL, worker, NULL) != 0) break;
            else pool.workers = i + 1;
    }
    atomic_store(&pool.busy, 0);
    return pool.workers + 1;
}

static void wake_workers(void) {
    if (atomic_load(&pool.sleepers)) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
}

/* A job of `chunks` chunks for the workers (0: a wake-up call), the pool held by the caller: its generation. */
static uint32_t publish(int chunks) {
    uint32_t gen = (uint32_t)(atomic_load(&pool.ticket) >> 32) + 1;
    atomic_store(&pool.ticket, (uint64_t)gen << 32 | (uint64_t)chunks << 16);
    wake_workers();
    return gen;
}

/* A step begins: the workers wake while its first row is embedded and normalised (not at its first product). */
static void pool_begin(void) {
    atomic_store(&pool.resting, 0);
    int expected = 0;
    if (atomic_load(&pool.workers) && atomic_compare_exchange_strong(&pool.busy, &expected, 1)) {
        publish(0);
        atomic_store(&pool.busy, 0);
    }
}

/* A step ends: the workers sleep rather than spin (the sampler's torch threads want the cores next). */
static void pool_end(void) { atomic_store(&pool.resting, 1); }

/* ys[i] = m xs[i] for the n rows, the weight rows shared among the threads (alone: as one chunk). */
static void product_rows(const Matrix *m, const float *const *xs, float *const *ys, int n) {
    int expected = 0;
    if (!atomic_load(&pool.workers) || m->rows < 64 || !atomic_compare_exchange_strong(&pool.busy, &expected, 1)) {
        /* (alone, a small product, or a step in another thread holds the pool) */
        product_range(m, xs, ys, n, 0, m->rows);
        return;
    }
    int threads = atomic_load(&pool.workers) + 1;
    /* about four chunks a thread (a late or busy one leaves less behind), of a multiple of 16 rows (a cache line
     * of float32 outputs: no two threads write one) */
    int chunk = (m->rows + 4 * threads - 1) / (4 * threads);
    chunk = (chunk + 15) / 16 * 16;
    pool.job = (Job){m, xs, ys, n, m->rows, chunk, (m->rows + chunk - 1) / chunk};
    take_chunks(publish(pool.job.chunks), 0);
    while (atomic_load(&pool.inflight)) relax();
    atomic_store(&pool.busy, 0);
}
