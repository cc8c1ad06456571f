// Command capgate-plugin-llm is the llm plugin: llm.ask (pack llm,
// permission llm.ask) answers a question with a configured LLM connection,
// grounded in the catalogue records the caller may read.
//
// Config block:
//
//	config:
//	  connection: local           # the slug of the one llm.ask uses; may be left out with one
//	  connections:
//	    - slug: local
//	      kind: openai            # any OpenAI-compatible Chat Completions endpoint
//	      base_url: http://127.0.0.1:11434/v1
//	      model: llama3.2
//	      api_key: ""             # optional; never logged
//	      timeout: 60s            # whole request, retries included
//	      max_tokens: 1024
//	      max_retries: 2          # on 408, 429 and 5xx
package main
