// A JSON value as the request carries a transform option or a PartitionSpec.
export type Json = null | boolean | number | string | Json[];
