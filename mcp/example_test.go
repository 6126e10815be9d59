package mcp_test

import (
	"fmt"

	"github.com/agentwire/agentwire/mcp"
)

// The input schema a typed tool publishes, inferred from its argument
// type; an x-mcp-header annotation would make the argument travel in an
// Mcp-Param- header too.
func ExampleSchemaFor() {
	type forecastIn struct {
		City string `json:"city"`
		Days int    `json:"days,omitempty"`
	}
	schema := mcp.SchemaFor(forecastIn{})
	fmt.Println(string(schema))
	headers, valid := mcp.SchemaHeaders(schema)
	fmt.Println(len(headers), valid)
	// Output:
	// {"properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"type":"object"}
	// 0 true
}
