module github.com/courier-go/courier/internal/browsertest

go 1.26.0

require (
	github.com/chromedp/chromedp v0.23.1
	github.com/courier-go/courier v0.0.0
)

require (
	github.com/chromedp/cdproto v0.160.1 // indirect
	github.com/gabriel-vasile/mimetype v1.4.16 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-playground/locales v0.14.2 // indirect
	github.com/go-playground/universal-translator v0.18.2 // indirect
	github.com/go-playground/validator/v10 v10.30.6 // indirect
	github.com/jmoiron/sqlx v1.4.0 // indirect
	github.com/leodido/go-urn v1.5.0 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/courier-go/courier => ../..
