/*
 * cassini-tool generatetokens (tool_tokens.c): offline, talks to no node.
 */
#ifndef CASSINI_NODE_TOOL_TOKENS_H
#define CASSINI_NODE_TOOL_TOKENS_H

/* Runs `generatetokens` with the arguments after the command name; returns
 * the exit status (0, or 1 with a message on stderr). */
int tool_generatetokens(int argc, char **argv);

#endif
