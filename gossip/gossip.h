/*
 * gossip/: Gossip membership (SYN/ACK/ACK2, generations, application states) and the phi-accrual failure detector, as state machines over the env seam. Filled by the Membership issue.
 *
 * Nothing is exported yet; see DESIGN.md for where this module sits.
 */
#ifndef CASSINI_GOSSIP_GOSSIP_H
#define CASSINI_GOSSIP_GOSSIP_H

#endif
