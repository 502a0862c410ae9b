/*
 * storage/: The local LSM engine: data model, mutations, commitlog, memtable, SSTables, compaction. Filled by the Storage issue.
 *
 * Nothing is exported yet; see DESIGN.md for where this module sits.
 */
#ifndef CASSINI_STORAGE_STORAGE_H
#define CASSINI_STORAGE_STORAGE_H

#endif
