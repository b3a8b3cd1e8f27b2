/* commands.h - every qk command: int cmd_NAME(int argc, char **argv).
 * argv[0] is the command's display name ("qk-inspect").  Returns the exit code.
 *
 * Declared weak: a command whose driver (cmd/NAME.c) is not in the tree links
 * as NULL and qk.c leaves it out, so a command exists exactly when its driver
 * does (and the Makefile makes the qk-NAME link from the same file list). */
#ifndef QK_COMMANDS_H
#define QK_COMMANDS_H

#define QK_COMMAND(name) int cmd_##name(int argc, char **argv) __attribute__((weak))

QK_COMMAND(inspect);
QK_COMMAND(quant);
QK_COMMAND(run);
QK_COMMAND(kld);
QK_COMMAND(bench);
QK_COMMAND(imatrix);
QK_COMMAND(convert);
QK_COMMAND(report);

#endif
