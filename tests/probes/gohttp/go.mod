module gohttp
go 1.19
