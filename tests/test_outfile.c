/* test_outfile.c - the atomic output helper (lib/core/outfile.h): complete or
 * absent, both temporaries (unnamed O_TMPFILE and named), replacement, write
 * errors with their errno text, the signal registry, directories. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/core/outfile.h"
#include "tests/testutil.h"

static char root[64];

static void mkroot(void)
{
    snprintf(root, sizeof root, "/tmp/qk-outfile-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
}

static void rmroot(const char *sub)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s/%s", root, sub);
    cr_assert_eq(system(cmd), 0);
    rmdir(root);
}

/* The names in root, space separated, sorted ("" when empty). */
static const char *listing(void)
{
    static char buf[4096];
    struct dirent **names;
    int n = scandir(root, &names, NULL, alphasort);
    cr_assert(n >= 0);
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..")) {
            strcat(buf, buf[0] ? " " : "");
            strcat(buf, names[i]->d_name);
        }
        free(names[i]);
    }
    free(names);
    return buf;
}

static char *at(const char *name)
{
    static char p[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", root, name);
    return p[k];
}

static void check_content(const char *path, const char *want)
{
    size_t n;
    char *got = tu_read(path, &n);
    cr_assert_eq(n, strlen(want), "%s: %zu bytes", path, n);
    cr_assert_str_eq(got, want);
    free(got);
}

/* path has mode bits & ~umask, as open and mkdir give */
static void expect_mode(const char *path, mode_t bits)
{
    mode_t u = umask(022);
    umask(u);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, bits & ~u, "%s: mode %o", path, (unsigned)(st.st_mode & 0777));
}

static void both_ways(void (*fn)(void))
{
    unsetenv("QK_OUT_NAMED");
    fn();
    setenv("QK_OUT_NAMED", "1", 1);
    fn();
    unsetenv("QK_OUT_NAMED");
}

static void new_and_replace(void)
{
    mkroot();
    qk_err err = {0};
    qk_out o;
    cr_assert_eq(qk_out_open(&o, at("a"), &err), 0, "%s", err.msg);
    cr_assert_eq(access(at("a"), F_OK), -1); /* nothing at DST until commit */
    cr_assert_eq(qk_out_write(&o, "hello world", 11, &err), 0);
    fprintf(o.f, "!%d", 42);
    cr_assert_eq(qk_out_pwrite(&o, 0, "HELLO", 5, &err), 0, "%s", err.msg);
    cr_assert_eq(qk_out_pwrite(&o, 9, "abc", 3, &err), QK_EIO); /* past what was written */
    cr_assert_eq(qk_out_commit(&o, &err), 0, "%s", err.msg);
    qk_out_abort(&o); /* a no-op after commit */
    check_content(at("a"), "HELLO world!42");
    cr_assert_str_eq(listing(), "a");
    /* replacing: the old bytes stay until the new ones are complete */
    cr_assert_eq(qk_out_open(&o, at("a"), &err), 0);
    cr_assert_eq(qk_out_write(&o, "new", 3, &err), 0);
    check_content(at("a"), "HELLO world!42");
    cr_assert_eq(qk_out_commit(&o, &err), 0, "%s", err.msg);
    check_content(at("a"), "new");
    cr_assert_str_eq(listing(), "a");
    /* abort: nothing, and DST as it was */
    cr_assert_eq(qk_out_open(&o, at("a"), &err), 0);
    cr_assert_eq(qk_out_write(&o, "lost", 4, &err), 0);
    qk_out_abort(&o);
    qk_out_abort(&o);
    check_content(at("a"), "new");
    cr_assert_str_eq(listing(), "a");
    cr_assert_eq(qk_out_write_file(at("b"), "bb", 2, &err), 0);
    check_content(at("b"), "bb");
    cr_assert_str_eq(listing(), "a b");
    expect_mode(at("b"), 0666); /* as for any created file */
    /* a missing directory is an I/O error naming DST */
    cr_assert_eq(qk_out_open(&o, at("no/such"), &err), QK_EIO);
    cr_assert_not_null(strstr(err.msg, "no/such"), "%s", err.msg);
    /* a directory at DST: the commit fails, nothing is left */
    cr_assert_eq(mkdir(at("dir"), 0755), 0);
    cr_assert_eq(qk_out_open(&o, at("dir"), &err), 0);
    cr_assert_eq(qk_out_commit(&o, &err), QK_EIO);
    cr_assert_not_null(strstr(err.msg, "dir: "), "%s", err.msg);
    cr_assert_str_eq(listing(), "a b dir");
    rmroot("*");
}
Test(outfile, new_replace_abort) { both_ways(new_and_replace); }

/* A write past RLIMIT_FSIZE: EFBIG (SIGXFSZ is ignored), "DST: write failed:
 * File too large", nothing left; at qk_out_write, and through o.f. */
static void too_large(void)
{
    mkroot();
    qk_err err = {0};
    qk_out o;
    static char big[1 << 16];
    struct rlimit rl = {4096, 4096};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    cr_assert_eq(qk_out_open(&o, at("big"), &err), 0);
    int rc = 0;
    for (int i = 0; i < 8 && !rc; i++)
        rc = qk_out_write(&o, big, sizeof big, &err);
    cr_assert_eq(rc, QK_EIO);
    char want[300];
    snprintf(want, sizeof want, "%s: write failed: %s", at("big"), strerror(EFBIG));
    cr_assert_str_eq(err.msg, want);
    cr_assert_eq(qk_out_commit(&o, &err), QK_EIO);
    cr_assert_str_eq(err.msg, want);
    cr_assert_str_eq(listing(), "");
    /* through the stream: found at commit */
    cr_assert_eq(qk_out_open(&o, at("big"), &err), 0);
    for (int i = 0; i < 2000; i++)
        fprintf(o.f, "line %d of a report that will not fit\n", i);
    cr_assert_eq(qk_out_commit(&o, &err), QK_EIO);
    cr_assert_str_eq(err.msg, want);
    cr_assert_str_eq(listing(), "");
    rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
    setrlimit(RLIMIT_FSIZE, &rl);
    rmdir(root);
}
Test(outfile, efbig) { both_ways(too_large); }

/* SIGTERM in a child with a live named temporary file and directory: both
 * removed, the child dies of the signal; SIGKILL leaves the unnamed one. */
Test(outfile, signal_removes_named)
{
    mkroot();
    for (int named = 0; named < 2; named++) {
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            if (named)
                setenv("QK_OUT_NAMED", "1", 1);
            qk_err err;
            qk_out o;
            qk_outdir d;
            if (qk_out_open(&o, at("f"), &err) || qk_out_write(&o, "x", 1, &err) ||
                qk_outdir_open(&d, at("d"), &err))
                _exit(1);
            char *p = qk_outdir_path(&d, "inside");
            if (qk_out_write_file(p, "y", 1, &err))
                _exit(1);
            free(p);
            fflush(o.f);
            raise(named ? SIGTERM : SIGKILL);
            _exit(2);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == (named ? SIGTERM : SIGKILL), "status %d", st);
        if (named) {
            cr_assert_str_eq(listing(), "");
        } else { /* the file vanished with the process; the directory (always named) remains */
            const char *l = listing();
            int probe = open(root, O_TMPFILE | O_WRONLY, 0600);
            if (probe < 0) { /* this filesystem has no O_TMPFILE: the file was named too */
                tu_note("no O_TMPFILE in %s: SIGKILL leaves the named temporary (%s)", root, l);
                rmroot("*");
                mkroot();
                continue;
            }
            close(probe);
            cr_assert(strncmp(l, "d.tmp.", 6) == 0 && !strchr(l, ' '), "%s", l);
            rmroot("d.tmp.*");
            mkroot();
        }
    }
    rmdir(root);
}

/* exit() without commit removes named temporaries; a parent's temporary is not
 * its forked child's to remove. */
Test(outfile, exit_removes_named)
{
    mkroot();
    setenv("QK_OUT_NAMED", "1", 1);
    qk_err err;
    static qk_out parent; /* static: reachable from the forked child at its exit */
    cr_assert_eq(qk_out_open(&parent, at("p"), &err), 0);
    pid_t pid = fork();
    if (pid == 0) {
        static qk_out o; /* static: still reachable at exit (no leak report) */
        static qk_outdir d;
        if (qk_out_open(&o, at("c"), &err) || qk_outdir_open(&d, at("d"), &err))
            _exit(1);
        exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const char *l = listing();
    cr_assert(strncmp(l, "p.tmp.", 6) == 0 && !strchr(l, ' '), "%s", l);
    qk_out_abort(&parent);
    cr_assert_str_eq(listing(), "");
    unsetenv("QK_OUT_NAMED");
    rmdir(root);
}

Test(outfile, directories)
{
    mkroot();
    qk_err err = {0};
    qk_outdir d;
    cr_assert_eq(qk_outdir_open(&d, at("out/"), &err), 0, "%s", err.msg);
    char *p = qk_outdir_path(&d, "x.json");
    cr_assert_eq(qk_out_write_file(p, "{}", 2, &err), 0);
    free(p);
    cr_assert_eq(access(at("out"), F_OK), -1);
    /* a message about a file inside names the output, not its temporary */
    snprintf(err.msg, sizeof err.msg, "%s/x.json: write failed: boom", d.tmp);
    qk_outdir_name_err(&d, &err);
    char want[300];
    snprintf(want, sizeof want, "%s/x.json: write failed: boom", at("out"));
    cr_assert_str_eq(err.msg, want);
    cr_assert_eq(qk_outdir_commit(&d, &err), 0, "%s", err.msg);
    check_content(at("out/x.json"), "{}");
    cr_assert_str_eq(listing(), "out");
    expect_mode(at("out"), 0777);
    /* a non-empty directory is refused; an empty one replaced; abort leaves nothing */
    cr_assert_eq(qk_outdir_open(&d, at("out"), &err), QK_EINPUT);
    cr_assert_eq(mkdir(at("empty"), 0755), 0);
    cr_assert_eq(qk_outdir_open(&d, at("empty"), &err), 0);
    p = qk_outdir_path(&d, "f");
    cr_assert_eq(qk_out_write_file(p, "f", 1, &err), 0);
    free(p);
    cr_assert_eq(qk_outdir_commit(&d, &err), 0, "%s", err.msg);
    check_content(at("empty/f"), "f");
    cr_assert_eq(qk_outdir_open(&d, at("gone"), &err), 0);
    p = qk_outdir_path(&d, "f");
    cr_assert_eq(qk_out_write_file(p, "f", 1, &err), 0);
    free(p);
    qk_outdir_abort(&d);
    qk_outdir_abort(&d);
    cr_assert_str_eq(listing(), "empty out");
    rmroot("*");
}
