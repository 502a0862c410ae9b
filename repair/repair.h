/*
 * repair/: Merkle-tree anti-entropy repair sessions and the in-node repair
 * scheduler. Filled by the Repair issue.
 *
 * Nothing is exported yet; see DESIGN.md for where this module sits.
 */
#ifndef CASSINI_REPAIR_REPAIR_H
#define CASSINI_REPAIR_REPAIR_H

#endif
