package pluginwire

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/internal/dispatch"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// CheckContent reports what makes a content block one the host cannot
// render: no kind, a medium without its media type, a link without its
// URI or name, embedded contents without a URI or a body, text that is not
// UTF-8. The SDK checks a handler's blocks with it before sending them and
// the host checks what arrives, as a plugin may be built without the SDK.
func CheckContent(c *capgatev1.Content) error {
	switch b := c.GetBlock().(type) {
	case *capgatev1.Content_Text:
		if !utf8.ValidString(b.Text) {
			return fmt.Errorf("text is not valid UTF-8")
		}
	case *capgatev1.Content_Image:
		if b.Image.GetMimeType() == "" {
			return fmt.Errorf("image has no media type")
		}
	case *capgatev1.Content_Audio:
		if b.Audio.GetMimeType() == "" {
			return fmt.Errorf("audio has no media type")
		}
	case *capgatev1.Content_ResourceLink:
		l := b.ResourceLink
		if l.GetUri() == "" || l.GetName() == "" {
			return fmt.Errorf("resource link needs a URI and a name")
		}
		if !utf8.ValidString(l.GetUri() + l.GetName() + l.GetTitle() + l.GetDescription() + l.GetMimeType()) {
			return fmt.Errorf("resource link is not valid UTF-8")
		}
	case *capgatev1.Content_Resource:
		return CheckResourceContents(b.Resource)
	default:
		return fmt.Errorf("block has no kind")
	}
	return nil
}

// CheckResourceContents reports what makes a resource's contents ones the
// host cannot render: no URI, neither text nor blob, text not UTF-8.
func CheckResourceContents(r *capgatev1.ResourceContents) error {
	if r.GetUri() == "" {
		return fmt.Errorf("resource contents have no URI")
	}
	if !utf8.ValidString(r.GetUri() + r.GetMimeType()) {
		return fmt.Errorf("resource contents' URI or media type is not valid UTF-8")
	}
	switch b := r.GetBody().(type) {
	case *capgatev1.ResourceContents_Text:
		if !utf8.ValidString(b.Text) {
			return fmt.Errorf("resource text is not valid UTF-8")
		}
	case *capgatev1.ResourceContents_Blob:
	default:
		return fmt.Errorf("resource contents have neither text nor blob")
	}
	return nil
}

// Contents are a plugin's content blocks in the gate's terms, with their
// size on the wire; an error names the first block the host cannot render.
func Contents(blocks []*capgatev1.Content) ([]dispatch.Content, int, error) {
	if len(blocks) == 0 {
		return nil, 0, nil
	}
	out := make([]dispatch.Content, len(blocks))
	size := 0
	for i, c := range blocks {
		if err := CheckContent(c); err != nil {
			return nil, 0, fmt.Errorf("content block %d: %w", i, err)
		}
		size += proto.Size(c)
		switch b := c.Block.(type) {
		case *capgatev1.Content_Text:
			out[i] = dispatch.Content{Type: dispatch.ContentText, Text: b.Text}
		case *capgatev1.Content_Image:
			out[i] = dispatch.Content{Type: dispatch.ContentImage, Data: b.Image.Data, MIMEType: b.Image.MimeType}
		case *capgatev1.Content_Audio:
			out[i] = dispatch.Content{Type: dispatch.ContentAudio, Data: b.Audio.Data, MIMEType: b.Audio.MimeType}
		case *capgatev1.Content_ResourceLink:
			l := b.ResourceLink
			out[i] = dispatch.Content{Type: dispatch.ContentResourceLink, Link: dispatch.ResourceLink{
				URI: l.Uri, Name: l.Name, Title: l.Title, Description: l.Description, MIMEType: l.MimeType,
				Size: l.GetSize(), HasSize: l.Size != nil,
			}}
		case *capgatev1.Content_Resource:
			out[i] = dispatch.Content{Type: dispatch.ContentResource, Resource: ResourceContents(b.Resource)}
		}
	}
	return out, size, nil
}

// ResourceContents is checked resource contents in the gate's terms.
func ResourceContents(r *capgatev1.ResourceContents) dispatch.ResourceContents {
	rc := dispatch.ResourceContents{URI: r.Uri, MIMEType: r.MimeType}
	switch b := r.Body.(type) {
	case *capgatev1.ResourceContents_Text:
		rc.Text = b.Text
	case *capgatev1.ResourceContents_Blob:
		rc.Blob, rc.Binary = b.Blob, true
	}
	return rc
}
