function ConvertFrom-Base64Text {
  param([Parameter(Mandatory)] [string]$Text)
  [Text.Encoding]::UTF8.GetString([Convert]::FromBase64String($Text))
}

function Get-SettingsPath {
  Join-Path $env:LOCALAPPDATA 'Packages\Microsoft.WindowsTerminal_8wekyb3d8bbwe\LocalState\settings.json'
}

function Get-WslDistros {
  wsl.exe --list --quiet | Where-Object { $_ -and $_.Trim() } | ForEach-Object { $_.Trim() -replace "`0", '' }
}

Export-ModuleMember -Function ConvertFrom-Base64Text, Get-SettingsPath, Get-WslDistros
