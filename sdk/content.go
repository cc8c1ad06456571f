package sdk

import (
	"fmt"
	"reflect"

	"github.com/capgate/capgate/internal/pluginwire"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Content is one block of a rich result: text, an image, a sound, a link
// to a resource or a resource's contents, for people and models to read.
// Make one with Text, Image, Audio, EmbeddedText or EmbeddedBlob, or use a
// ResourceLink. A capability answers blocks with the result types Contents
// (blocks alone) and Rich (blocks beside a structured value); the host
// renders each block as the caller's protocol allows.
type Content interface {
	wire() *capgatev1.Content
}

type content struct{ c *capgatev1.Content }

func (c content) wire() *capgatev1.Content { return c.c }

// Text is a block of text.
func Text(s string) Content {
	return content{&capgatev1.Content{Block: &capgatev1.Content_Text{Text: s}}}
}

// Image is an image of media type mimeType ("image/png"), sent as base64.
func Image(data []byte, mimeType string) Content {
	return content{&capgatev1.Content{Block: &capgatev1.Content_Image{Image: &capgatev1.MediaContent{Data: data, MimeType: mimeType}}}}
}

// Audio is a sound of media type mimeType ("audio/wav"), sent as base64.
func Audio(data []byte, mimeType string) Content {
	return content{&capgatev1.Content{Block: &capgatev1.Content_Audio{Audio: &capgatev1.MediaContent{Data: data, MimeType: mimeType}}}}
}

// EmbeddedText is the contents of the resource at uri, as text.
func EmbeddedText(uri, mimeType, text string) Content {
	return content{&capgatev1.Content{Block: &capgatev1.Content_Resource{Resource: &capgatev1.ResourceContents{
		Uri: uri, MimeType: mimeType, Body: &capgatev1.ResourceContents_Text{Text: text}}}}}
}

// EmbeddedBlob is the contents of the resource at uri, as bytes.
func EmbeddedBlob(uri, mimeType string, data []byte) Content {
	return content{&capgatev1.Content{Block: &capgatev1.Content_Resource{Resource: &capgatev1.ResourceContents{
		Uri: uri, MimeType: mimeType, Body: &capgatev1.ResourceContents_Blob{Blob: data}}}}}
}

// ResourceLink is a block that points at a resource the caller may read
// rather than carrying its contents. URI and Name are required.
type ResourceLink struct {
	URI         string
	Name        string
	Title       string
	Description string
	MIMEType    string
	// Size is the contents' size in bytes; 0 leaves it unsaid.
	Size uint64
}

func (l ResourceLink) wire() *capgatev1.Content {
	w := &capgatev1.ResourceLink{Uri: l.URI, Name: l.Name, Title: l.Title, Description: l.Description, MimeType: l.MIMEType}
	if l.Size > 0 {
		w.Size = &l.Size
	}
	return &capgatev1.Content{Block: &capgatev1.Content_ResourceLink{ResourceLink: w}}
}

// Contents is the result of a capability that answers content blocks
// alone: a Tool[In, sdk.Contents] declares no output schema, and its
// structured result is null.
type Contents []Content

// Rich is the result of a capability that answers content blocks beside a
// structured value: a Tool[In, sdk.Rich[T]] declares T's output schema,
// and Value is checked against it as any result is.
type Rich[T any] struct {
	Content []Content
	Value   T
}

// richResult is a result type that carries content blocks.
type richResult interface {
	// parts returns the blocks and the structured value (nil for none).
	parts() ([]Content, any, bool)
}

func (c Contents) parts() ([]Content, any, bool) { return c, nil, false }
func (r Rich[T]) parts() ([]Content, any, bool)  { return r.Content, r.Value, true }

// valueType is the Go type of Rich's structured value.
func (Rich[T]) valueType() reflect.Type { return reflect.TypeFor[T]() }

// richType reports whether Out carries content blocks, and the type of its
// structured value (nil for Contents).
func richType[Out any]() (value reflect.Type, rich bool) {
	var zero Out
	switch v := any(zero).(type) {
	case Contents:
		return nil, true
	case interface{ valueType() reflect.Type }:
		return v.valueType(), true
	}
	return nil, false
}

// wireContents checks blocks and puts them in the contract's terms. A
// block the host could not render is the handler's bug, reported before
// anything is sent.
func wireContents(blocks []Content) ([]*capgatev1.Content, error) {
	if len(blocks) == 0 {
		return nil, nil
	}
	out := make([]*capgatev1.Content, 0, len(blocks))
	for i, b := range blocks {
		if b == nil {
			return nil, fmt.Errorf("content block %d is nil", i)
		}
		w := b.wire()
		if err := pluginwire.CheckContent(w); err != nil {
			return nil, fmt.Errorf("content block %d: %w", i, err)
		}
		out = append(out, w)
	}
	return out, nil
}
