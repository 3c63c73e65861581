module github.com/sluicehq/sluice/adapters/echo

go 1.26.8

require (
	github.com/labstack/echo/v5 v5.4.4
	github.com/sluicehq/sluice v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
)

require github.com/dunglas/httpsfv v1.1.2 // indirect

// The root module of this repository; released together with this one.
replace github.com/sluicehq/sluice v0.0.0-00010101000000-000000000000 => ../..
