/*
 * replication/: The coordinator: consistency levels, read/write paths, read
 * repair, hinted handoff, batchlog. Filled by the Coordinator issue.
 *
 * Nothing is exported yet; see DESIGN.md for where this module sits.
 */
#ifndef CASSINI_REPLICATION_REPLICATION_H
#define CASSINI_REPLICATION_REPLICATION_H

#endif
