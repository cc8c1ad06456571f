package llm

// The capability's input and output. Their JSON Schemas, inferred by the
// SDK, are what agents see: the jsonschema tags are written for them.

// AskIn is llm.ask's input. Its capgate tags are the one statement of its
// bounds: agents read them in tools/list, the host refuses what exceeds
// them, and the plugin's own checks read them back (bounds.go).
type AskIn struct {
	// Question is bounded because a longer one is no question but a
	// document, and would only crowd the sources out of the window.
	Question string `json:"question" capgate:"maxLength=4000" jsonschema:"the question to answer, in words, e.g. which rooms have a projector?"`
	// Entity's bound is platform.search's own (platform.MaxEntityLen).
	Entity string `json:"entity,omitempty" capgate:"maxLength=128" jsonschema:"ground the answer only in records of this catalogue entity type, e.g. booking.resource; every type when omitted"`
	// MaxSources bounds how many catalogue records go into the prompt.
	MaxSources int `json:"max_sources,omitempty" capgate:"minimum=0,maximum=1000" jsonschema:"at most this many catalogue records to ground the answer in; 5 when omitted, and a larger value is capped to the server's max_results"`
}

// Source is a catalogue record the answer was grounded in.
type Source struct {
	Entity string `json:"entity" jsonschema:"the catalogue entity type"`
	ID     string `json:"id" jsonschema:"the record's id; pass entity and id to platform.get for the full record"`
	Title  string `json:"title" jsonschema:"the record's name"`
}

// Usage is the provider's token count for the answer.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// AskOut is llm.ask's output.
type AskOut struct {
	Answer string `json:"answer" jsonschema:"the model's answer; it cites sources by their number, [1] being the first of sources"`
	// Sources is empty (never absent) when the answer is not grounded.
	Sources []Source `json:"sources" jsonschema:"the catalogue records given to the model, in the order it saw them; empty when the caller may not read the catalogue or nothing matched, and the answer then says it could not consult it"`
	Model   string   `json:"model" jsonschema:"the model that answered, as the provider named it"`
	Usage   Usage    `json:"usage" jsonschema:"tokens the provider counted for this answer"`
}
