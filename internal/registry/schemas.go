package registry

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// SchemasOf infers the input and output schemas of a capability the host
// provides itself from its Go types, In and Out. adjust, when set,
// tightens the input schema (bounds, enums) before it is encoded.
func SchemasOf[In, Out any](adjust func(in *jsonschema.Schema)) (in, out json.RawMessage, err error) {
	inS, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	if adjust != nil {
		adjust(inS)
	}
	outS, err := jsonschema.For[Out](nil)
	if err != nil {
		return nil, nil, fmt.Errorf("output schema: %w", err)
	}
	if in, err = json.Marshal(inS); err != nil {
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	if out, err = json.Marshal(outS); err != nil {
		return nil, nil, fmt.Errorf("output schema: %w", err)
	}
	return in, out, nil
}
