// Package packstream walks a plan's packed stream chunk by chunk: the
// payload bytes of a plan in plan order, which the owner packs into
// staging for READ gather and the requester packs in waves for WRITE
// gather. Its cursors run the bufferpool/pack loops unchecked: callers
// validate the plan and windows first.
package packstream
