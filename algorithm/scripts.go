package algorithm

import (
	"embed"

	"github.com/sluicehq/sluice/core"
)

//go:embed lua/*.lua
var luaFS embed.FS

// loadScript returns the embedded Lua twin lua/<name>.lua. It panics only if
// the file is missing from the build, which the package's tests catch.
func loadScript(name string) *core.Script {
	src, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("sluice/algorithm: missing embedded script " + name + ".lua")
	}
	return core.NewScript(name, string(src))
}
