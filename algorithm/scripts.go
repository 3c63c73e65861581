package algorithm

import (
	"embed"

	"github.com/sluicehq/sluice/core"
)

//go:embed lua/*.lua
var luaFS embed.FS

// loadScript returns the embedded Lua twin lua/<name>.lua, after the
// prelude every twin shares (lua/prelude.lua: the clock and exact integer
// division). It panics only if a file is missing from the build, which the
// package's tests catch.
func loadScript(name string) *core.Script {
	prelude, err := luaFS.ReadFile("lua/prelude.lua")
	if err != nil {
		panic("sluice/algorithm: missing embedded lua/prelude.lua")
	}
	src, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("sluice/algorithm: missing embedded script " + name + ".lua")
	}
	return core.NewScript(name, string(prelude)+string(src))
}
