package checkpoint

// Exported for the external tests (fuzzing and the corruption matrix).
var (
	EncodeCheckpoint = encodeCheckpoint
	DecodeCheckpoint = decodeCheckpoint
	EncodePointer    = encodePointer
	DecodePointer    = decodePointer
)

// Name-length limits, so tests probe exactly at the boundary.
const (
	MaxUIDLen = maxComponentLen
	MaxRVLen  = maxFileNameLen
)

// Tracking-file codecs, for the fuzz targets.
var (
	EncodeBadMarks = encodeBadMarks
	DecodeBadMarks = decodeBadMarks
	EncodeStartups = encodeStartups
	DecodeStartups = decodeStartups
)
