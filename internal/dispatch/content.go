package dispatch

import "context"

// ContentType is the kind of a Content block.
type ContentType uint8

const (
	// ContentText is text for people and models to read.
	ContentText ContentType = iota + 1
	// ContentImage is an image: Data in MIMEType.
	ContentImage
	// ContentAudio is a sound: Data in MIMEType.
	ContentAudio
	// ContentResourceLink points at a resource: Link.
	ContentResourceLink
	// ContentResource embeds a resource's contents: Resource.
	ContentResource
)

// Content is one block of a rich result, in no protocol's terms: what a
// call answers for people and models beside its structured result. The
// protocol adapters render it as their revision allows.
type Content struct {
	Type ContentType
	// Text is a ContentText block's text.
	Text string
	// Data and MIMEType are a ContentImage or ContentAudio block's bytes
	// and media type.
	Data     []byte
	MIMEType string
	// Link is a ContentResourceLink block's target.
	Link ResourceLink
	// Resource is a ContentResource block's contents.
	Resource ResourceContents
}

// ResourceLink names a resource without its contents.
type ResourceLink struct {
	URI, Name, Title, Description, MIMEType string
	// Size is the contents' size in bytes when HasSize says it is known.
	Size    uint64
	HasSize bool
}

// ResourceContents is what a resource holds: Text, or Blob when Binary.
type ResourceContents struct {
	URI, MIMEType string
	Text          string
	Blob          []byte
	Binary        bool
}

// ContentReport is where a provider hands the content blocks of a call
// to the adapter that asked for them (WithContentReport). The gate's
// result stays the structured JSON, which it checks against the output
// schema and which audit records and idempotency replays keep: the blocks
// are for the caller's client alone, so a replay, a held call and a
// nested call carry none.
type ContentReport struct {
	Blocks []Content
	// Bytes is the blocks' size as the plugin sent them, which counts
	// against the host's max_result_bytes with the result.
	Bytes int
}

type contentKey struct{}

// WithContentReport returns ctx carrying r, which the provider of the call
// made with ctx fills with the call's content blocks. Only an adapter that
// renders them adds it.
func WithContentReport(ctx context.Context, r *ContentReport) context.Context {
	return context.WithValue(ctx, contentKey{}, r)
}

// ContentReportOf returns the report ctx carries, nil when no adapter
// asked for content blocks.
func ContentReportOf(ctx context.Context) *ContentReport {
	r, _ := ctx.Value(contentKey{}).(*ContentReport)
	return r
}
