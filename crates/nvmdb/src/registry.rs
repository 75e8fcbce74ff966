//! Opening an engine by name on a region (or, for peers, a directory).
