/* commands.h - every qk command: int cmd_NAME(int argc, char **argv).
 * argv[0] is the command's display name ("qk-inspect").  Returns the exit code. */
#ifndef QK_COMMANDS_H
#define QK_COMMANDS_H

int cmd_inspect(int argc, char **argv);
int cmd_quant(int argc, char **argv);



#endif
