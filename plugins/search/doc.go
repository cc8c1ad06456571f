// Command capgate-plugin-search is the search plugin: a full-text index of
// every catalogue entity type the other plugins provide, with the
// capabilities platform.search, platform.get and platform.list, all in the
// search pack (permission catalogue.read). The host serves MCP
// resources/list and resources/read through platform.list and platform.get.
//
// The host starts it; its index lives in <data_dir>/index (bleve). It takes
// no config keys. `capgate search reindex` starts it with Rebuild, which
// empties the index and syncs it again from every provider.
package main
