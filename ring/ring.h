/*
 * ring/: Murmur3 partitioner, vnode token ring, token allocation and replica placement (SimpleStrategy, NetworkTopologyStrategy, LocalStrategy). A pure library: no I/O. Filled by the Ring issue.
 *
 * Nothing is exported yet; see DESIGN.md for where this module sits.
 */
#ifndef CASSINI_RING_RING_H
#define CASSINI_RING_RING_H

#endif
