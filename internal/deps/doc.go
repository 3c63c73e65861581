// Package deps holds no code: its tests keep the root module light. What a
// user imports is what a user pulls, so the root module (core, algorithm,
// the stores, nethttp, conformance) requires only what every user needs;
// web frameworks, plotting, terminal, metrics and fault-proxy libraries live
// in modules of their own (adapters/gin, adapters/echo, adapters/echov4,
// cmd/sluice, bench, ...).
package deps
