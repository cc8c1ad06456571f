// Package llm is the llm pack: llm.ask answers a question with a configured
// LLM connection (any OpenAI-compatible Chat Completions endpoint), grounded
// in the catalogue records the caller may read — found with platform.search
// and read with platform.get as nested calls through the host's gate, as the
// caller, so the model never sees more than the caller could.
package llm
