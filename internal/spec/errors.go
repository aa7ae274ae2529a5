package spec

// DefaultBatchSize is how many parents one transaction of a pass (rollup,
// compaction, move, recount) takes, unless configured.
const DefaultBatchSize = 500
