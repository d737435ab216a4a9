module github.com/sparkdap/sparkdap

go 1.26.0

require (
	github.com/go-json-experiment/json v1.27.2
	github.com/google/go-dap v0.12.0
	github.com/hashicorp/yamux v0.1.2
	github.com/mattn/go-isatty v0.0.20
	github.com/rs/zerolog v1.35.1
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
)

require github.com/mattn/go-colorable v0.1.14 // indirect
