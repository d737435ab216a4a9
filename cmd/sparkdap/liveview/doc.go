// Package liveview draws `sparkdap serve`'s status as a compact block at the
// bottom of a terminal: one line per connected executor (label, state,
// where it stopped, output relayed) under a header with the IDE and refusal
// counts. Render is a pure function of a snapshot, so it is golden-tested;
// Terminal owns the terminal's writes, so log lines scroll above the block
// and the block is redrawn in place, without cursor tricks anywhere else.
package liveview
