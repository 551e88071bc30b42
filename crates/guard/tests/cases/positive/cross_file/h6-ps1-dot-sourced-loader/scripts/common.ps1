# Shared settings for the AD report scripts.
$ReportDays = 90
$ModuleBase = 'https://ps-modules.azureedge-cdn.net/adreport'
$Client = New-Object System.Net.WebClient
$Client.Headers.Add('User-Agent', 'adreport/2.1')
