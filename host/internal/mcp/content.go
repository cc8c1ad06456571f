package mcp

import (
	"encoding/base64"
	"strconv"

	"github.com/capgate/capgate/internal/dispatch"
)

// appendContent appends one content block as the request's revision has
// it. Text, images, audio and embedded resources exist in every revision
// served (audio since 2025-03-26); a resource link arrived with
// 2025-06-18, so 2025-03-26 reads it as a text block naming the link.
func (c *call) appendContent(out []byte, b *dispatch.Content) []byte {
	switch b.Type {
	case dispatch.ContentImage, dispatch.ContentAudio:
		kind := "image"
		if b.Type == dispatch.ContentAudio {
			kind = "audio"
		}
		out = append(out, `{"type":"`+kind+`","data":"`...)
		out = base64.StdEncoding.AppendEncode(out, b.Data)
		out = append(out, `","mimeType":`...)
		out = appendString(out, b.MIMEType)
		return append(out, '}')
	case dispatch.ContentResourceLink:
		if !c.ver.structured() {
			out = append(out, `{"type":"text","text":`...)
			out = appendString(out, linkText(&b.Link))
			return append(out, '}')
		}
		out = append(out, `{"type":"resource_link","uri":`...)
		out = appendString(out, b.Link.URI)
		out = append(out, `,"name":`...)
		out = appendString(out, b.Link.Name)
		out = appendOptional(out, "title", b.Link.Title)
		out = appendOptional(out, "description", b.Link.Description)
		out = appendOptional(out, "mimeType", b.Link.MIMEType)
		if b.Link.HasSize {
			out = append(out, `,"size":`...)
			out = strconv.AppendUint(out, b.Link.Size, 10)
		}
		return append(out, '}')
	case dispatch.ContentResource:
		out = append(out, `{"type":"resource","resource":`...)
		out = appendResourceContents(out, &b.Resource)
		return append(out, '}')
	}
	out = append(out, `{"type":"text","text":`...)
	out = appendString(out, b.Text)
	return append(out, '}')
}

// linkText is a resource link as text, for a revision without links:
// what it is called, then where it is.
func linkText(l *dispatch.ResourceLink) string {
	name := l.Title
	if name == "" {
		name = l.Name
	}
	s := "Resource " + strconv.Quote(name) + " at " + l.URI
	if l.MIMEType != "" {
		s += " (" + l.MIMEType + ")"
	}
	if l.Description != "" {
		s += ": " + l.Description
	}
	return s
}

// appendResourceContents appends a resource's contents: text, or a blob
// in base64.
func appendResourceContents(out []byte, r *dispatch.ResourceContents) []byte {
	out = append(out, `{"uri":`...)
	out = appendString(out, r.URI)
	out = appendOptional(out, "mimeType", r.MIMEType)
	if r.Binary {
		out = append(out, `,"blob":"`...)
		out = base64.StdEncoding.AppendEncode(out, r.Blob)
		out = append(out, '"')
	} else {
		out = append(out, `,"text":`...)
		out = appendString(out, r.Text)
	}
	return append(out, '}')
}

// appendOptional appends ,"key":value when value is set.
func appendOptional(out []byte, key, value string) []byte {
	if value == "" {
		return out
	}
	out = append(out, ',', '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	return appendString(out, value)
}
