/*
 * cassini-tool sstablemetadata, sstabledump, sstableverify and
 * sstableexpiredblockers (tool_sstable.c): offline,
 * read SSTable files, talk to no node.
 */
#ifndef CASSINI_NODE_TOOL_SSTABLE_H
#define CASSINI_NODE_TOOL_SSTABLE_H

/* Each runs its command with the arguments after the command name and
 * returns the exit status (0; 1 with a message on stderr when an argument
 * is wrong or a file is damaged or missing). */
int tool_sstablemetadata(int argc, char **argv);
int tool_sstabledump(int argc, char **argv);
/* sstableverify FILE...: 1 when any file fails a check. */
int tool_sstableverify(int argc, char **argv);
/* sstableexpiredblockers [-g GC_GRACE_SECONDS] FILE...: the SSTables of
 * one table; 1 when none opens. */
int tool_sstableexpiredblockers(int argc, char **argv);

#endif
