/*
 * spindled: a FUSE file system with one file, disk.img, whose reads and writes are served
 * like a single disk spindle: one request at a time at RATE MB/s (10^6 bytes), plus SEEK ms
 * when a request does not start where the previous one ended. Bytes live in BACKING (a file
 * on tmpfs), so the model is the only limit. A loop device over disk.img is then a slow
 * disk whose queue builds up in the kernel's I/O scheduler (see slow_disk.py for why).
 *
 * In C rather than Python because the per-request cost must stay small next to the
 * modelled service time: the loop driver sends one cgroup's requests one at a time, so
 * any per-request overhead shows up as lost bandwidth.
 *
 *   spindled BACKING MOUNTPOINT RATE_MBPS SEEK_MS
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *disk_path = "/disk.img";
static int backing_fd = -1;
static off_t disk_size;
static double ns_per_byte;
static long long seek_ns;

static pthread_mutex_t spindle_lock = PTHREAD_MUTEX_INITIALIZER;
static long long busy_until_ns;
static off_t head = -1;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Reserve the spindle for this request, then sleep until its service would be complete. */
static void spindle_serve(off_t offset, size_t length)
{
    long long service = (long long)(length * ns_per_byte), done;
    pthread_mutex_lock(&spindle_lock);
    if (offset != head)
        service += seek_ns;
    head = offset + (off_t)length;
    long long start = now_ns();
    if (busy_until_ns > start)
        start = busy_until_ns;
    busy_until_ns = done = start + service;
    pthread_mutex_unlock(&spindle_lock);
    struct timespec until = {.tv_sec = done / 1000000000LL, .tv_nsec = done % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
}

static int disk_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    (void)fi;
    memset(st, 0, sizeof(*st));
    if (strcmp(path, "/") == 0) {
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    }
    if (strcmp(path, disk_path) == 0) {
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = disk_size;
        return 0;
    }
    return -ENOENT;
}

static int disk_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                        struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    (void)off; (void)fi; (void)flags;
    if (strcmp(path, "/") != 0)
        return -ENOENT;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    fill(buf, disk_path + 1, NULL, 0, 0);
    return 0;
}

static int disk_open(const char *path, struct fuse_file_info *fi)
{
    if (strcmp(path, disk_path) != 0)
        return -ENOENT;
    fi->direct_io = 1;  /* no page cache for disk.img: every loop request reaches the spindle */
    return 0;
}

static int disk_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path; (void)fi;
    spindle_serve(off, size);
    ssize_t n = pread(backing_fd, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int disk_write(const char *path, const char *buf, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    (void)path; (void)fi;
    spindle_serve(off, size);
    ssize_t n = pwrite(backing_fd, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int disk_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path; (void)datasync; (void)fi;
    return 0;
}

static int disk_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    (void)path; (void)fi;
    return size == disk_size ? 0 : -EPERM;
}

static const struct fuse_operations disk_ops = {
    .getattr = disk_getattr,
    .readdir = disk_readdir,
    .open = disk_open,
    .read = disk_read,
    .write = disk_write,
    .fsync = disk_fsync,
    .truncate = disk_truncate,
};

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s BACKING MOUNTPOINT RATE_MBPS SEEK_MS\n", argv[0]);
        return 2;
    }
    double rate_mbps = atof(argv[3]), seek_ms = atof(argv[4]);
    if (rate_mbps <= 0 || seek_ms < 0) {
        fprintf(stderr, "spindled: rate %s MB/s must be > 0 and seek %s ms >= 0\n", argv[3], argv[4]);
        return 2;
    }
    ns_per_byte = 1000.0 / rate_mbps;  /* 1e9 ns / (rate * 1e6 bytes) */
    seek_ns = (long long)(seek_ms * 1e6);
    backing_fd = open(argv[1], O_RDWR);
    if (backing_fd < 0) {
        perror(argv[1]);
        return 1;
    }
    struct stat st;
    fstat(backing_fd, &st);
    disk_size = st.st_size;
    char *fuse_argv[] = {argv[0], "-f", argv[2], NULL};
    return fuse_main(3, fuse_argv, &disk_ops, NULL);
}
