# The TeX Live subset the manuscript needs (latexmk + pdflatex).
{ pkgs }:
pkgs.texlive.combine {
  inherit (pkgs.texlive) scheme-basic latexmk booktabs siunitx xcolor hyperref lm microtype geometry
    caption subcaption float etoolbox pgf collection-fontsrecommended;
}
